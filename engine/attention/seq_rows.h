// File: engine/attention/seq_rows.h
//
// SeqRows: where one sequence's new tokens sit in a device's packed activation
// buffer, and where its history lives. Every attention kind (MHA, MLA, KDA,
// GLA) runs over a list of these, so the device worker packs a step once and
// each layer finds its own kind of state: page tables for full attention,
// a state slot (and optionally a checkpoint slot) for linear attention.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>

namespace sy::engine {

struct SeqRows {
  int row = 0;                     // first row in the packed [tokens x H] buffer
  int n = 0;                       // new tokens (rows), positions start_pos .. start_pos + n - 1
  int start_pos = 0;               // tokens already folded into the cache / state
  const int32_t* pages = nullptr;  // KV page table covering start_pos + n positions
  int state_slot = -1;             // recurrent-state slot (StatePool), -1 if none
  // Prefix-cache checkpoint (linear attention only): after the first
  // `checkpoint_at` new tokens (1..n; 0 = none), each linear layer also
  // writes its recurrent and conv state into its layer of `checkpoint_slot`,
  // so that slot ends the step holding the state after start_pos +
  // checkpoint_at tokens. REQUIRES (when set): checkpoint_slot != state_slot.
  int checkpoint_slot = -1;
  int checkpoint_at = 0;
};

// Sum over a seq's n new tokens of their context lengths (start_pos + i + 1):
// the cached rows its attention reads, for span FLOP / byte estimates.
inline int64_t CtxSum(int start_pos, int n) {
  return static_cast<int64_t>(n) * start_pos + static_cast<int64_t>(n) * (n + 1) / 2;
}

}  // namespace sy::engine
