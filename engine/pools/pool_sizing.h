// File: engine/pools/pool_sizing.h
//
// SizePools: splits one device's pool-memory budget between the two pools of
// a hybrid model (seed 000 "Hybrid Memory Pools", seed 002 §2.2): the paged
// KvPool of the full-attention layers and the StatePool of the linear layers
// (one slot per running request). The split is the operator's knob: more
// state memory admits more concurrent requests, more KV memory holds longer
// sequences.
//
//   ASSIGN_OR_RETURN(PoolSizing s, SizePools(config, /*page_size=*/16,
//                                            /*budget_bytes_per_device=*/1 << 30,
//                                            /*state_fraction=*/0.25));
//   runner_options.kv_pages_per_device = s.kv_pages;
//   runner_options.state_slots_per_device = s.state_slots;
//
// Arithmetic (all fp32, as the pools store them):
//   slot_bytes  = linear_layers * state_floats_per_layer * 4
//   page_bytes  = full_attention_layers * page_size * kv_floats_per_token_layer * 4
//   state_slots = floor(budget * state_fraction / slot_bytes)
//   kv_pages    = floor((budget - state_slots * slot_bytes) / page_bytes)
// so what slot rounding leaves over goes to KV pages. kv_bytes and
// state_bytes are what the pools will hold (pages * page_bytes, slots *
// slot_bytes), never more than the budget together.
//
// A model without linear layers (arch "moe") gives everything to KV:
// state_fraction is range-checked ([0, 1)) and then ignored, so one default
// flag value works for every model; state_slots and state_bytes are 0.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/model/config.h"

namespace sy::engine {

struct PoolSizing {
  int kv_pages = 0;
  int state_slots = 0;
  int64_t kv_bytes = 0;
  int64_t state_bytes = 0;
};

// Bytes of one KV page (all full-attention layers) and of one recurrent-state
// slot (all linear layers; 0 for a model without them), as KvPool::page_bytes
// and StatePool::slot_bytes will report them.
int64_t KvPageBytes(const ModelConfig& c, int page_size);
int64_t StateSlotBytes(const ModelConfig& c);

// INVALID_ARGUMENT (naming the numbers) when the config is invalid,
// page_size < 1, the budget is not positive, state_fraction is outside [0, 1)
// (outside (0, 1) for a hybrid model), the state share cannot hold one slot,
// or the KV share cannot hold the pages of one max_seq request.
Result<PoolSizing> SizePools(const ModelConfig& c, int page_size, int64_t budget_bytes_per_device,
                             double state_fraction);

}  // namespace sy::engine
