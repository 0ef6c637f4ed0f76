// File: engine/pools/state_move.h
//
// StateMove: one request's KV pages and recurrent-state slot copied from one
// device's pools to another's, ids as each pool hands them out. The
// scheduler produces these when it re-homes requests (engine/scheduler/
// rehome.h); the model runner carries them out between steps
// (engine/model_executor/parallel_switch.h MoveRequestState). It lives here,
// below both, because it speaks only of pool ids.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <vector>

namespace sy::engine {

// Page i of `from_pages` on device `from` -> page i of `to_pages` on device
// `to`; the state slot likewise (-1: none).
struct StateMove {
  int64_t request_id = 0;
  int from = 0, to = 0;
  std::vector<int32_t> from_pages, to_pages;
  int from_slot = -1, to_slot = -1;
};

}  // namespace sy::engine
