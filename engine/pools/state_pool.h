// File: engine/pools/state_pool.h
//
// StatePool: one device's recurrent-state pool for the linear-attention
// layers of a hybrid model (seed 000 "Hybrid Memory Pools", seed 002 §2.2).
// A slot is one request's whole linear-attention state: for every linear
// layer, the recurrent state (heads x [d x d], fp32) and the short-conv state
// (the last conv_kernel - 1 pre-conv inputs of the q, k and v channels). A
// request holds exactly one slot from admission to finish or preemption;
// chunked prefill and decode continue in the same slot. Its size does not
// grow with the sequence: the pool caps concurrency, the KvPool caps tokens.
//
//   StatePool pool({.slots = 64, .layers = 6, .state_floats = 4 * 64 * 64,
//                   .conv_floats = 3 * 3 * 256});
//   int slot = pool.Allocate().value();
//   pool.Zero(slot);                        // a fresh slot is zeroed before use
//   pool.Copy(checkpoint, slot);            // ...or seeded from a prefix checkpoint
//   float* s = pool.State(slot, /*layer=*/2);
//   pool.Free(slot);
//
// Invariant: a slot handed out by Allocate holds whatever its last owner left;
// before a sequence uses it, the model either zeroes it (a sequence starting
// at position 0) or overwrites it whole with Copy from a prefix-cache
// checkpoint slot (seed 002 §2.1 "Keeping Checkpoints Clean"), so stale state
// can never leak between requests. A checkpoint slot is an ordinary slot that
// holds the state after exactly L tokens of some prefix; who owns it (the
// prefix cache) is outside this class.
//
// Shards (tensor-parallel attention, seed 003 §4; docs/PARALLELISM.md):
// with SetShards(P) the same storage is read as P * slots slots of 1/P the
// floats per layer: state_floats / P (device r's heads [r heads/P, (r+1)
// heads/P) of the head-major recurrent state) then conv_floats / P (block r
// of each of the conv_rows groups of channels), and storage slot d * slots
// + s holds device r's share of slot s of device d's pool. Allocate/Free
// keep handing out ids in [0, slots) that count device d's share, so a
// request's slot survives a switch; State/Conv/Zero/Copy take storage
// slots. engine/parallelism/state_reshard.h moves the contents; SetShards
// moves nothing.
//
// Thread-safety: Allocate/Free/counters on the scheduler thread between
// steps; State/Conv/Zero/Copy on the owning device's worker during a step. A
// step is a barrier, so the two never overlap.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace sy::engine {

struct StatePoolOptions {
  int slots = 0;             // concurrent requests this device can hold
  int layers = 0;            // linear-attention layers
  int64_t state_floats = 0;  // recurrent state of one layer: heads * d * d
  int64_t conv_floats = 0;   // conv state of one layer (0 for GLA)
  // The conv state as groups of equal width that shard by channel block
  // (KDA: conv_kernel - 1 rows of q | k | v, so 3 (K - 1) groups of heads *
  // head_dim); 0 when conv_floats is 0.
  int conv_groups = 0;
  // false: bookkeeping only (the simulated backend, engine/sim/): no storage
  // is allocated; Allocate/Free/UsedSlots/SetShards and slot_bytes() work as
  // usual and bytes() still reports what the slots would hold. SlotData,
  // Zero, Copy, State and Conv then REQUIRE storage (asserted).
  bool allocate_storage = true;
};

class StatePool {
 public:
  // slots == 0 or layers == 0 gives an empty pool (a model without linear layers).
  explicit StatePool(const StatePoolOptions& options);
  StatePool(const StatePool&) = delete;
  StatePool& operator=(const StatePool&) = delete;

  // RESOURCE_EXHAUSTED if no slot is free.
  Result<int> Allocate();
  // REQUIRES: slot was returned by Allocate and not freed since.
  void Free(int slot);
  // Ids handed out and not freed, ascending.
  std::vector<int> UsedSlots() const;
  // INVALID_ARGUMENT unless shards >= 1 divides state_floats and every conv
  // group. Changes how storage is read (above), not its contents.
  Status SetShards(int shards);
  int shards() const { return shards_; }
  int storage_slots() const { return options_.slots * shards_; }
  // Floats of one layer's recurrent (conv) state under the current reading.
  int64_t state_floats() const { return options_.state_floats / shards_; }
  int64_t conv_floats() const { return options_.conv_floats / shards_; }
  // Storage slot `slot` as one block of slot_floats(): [layers][state | conv].
  float* SlotData(int slot);
  const float* SlotData(int slot) const;
  int64_t slot_floats() const { return slot_floats_ / shards_; }

  // The functions below take storage slots (< storage_slots()).
  // Zeroes every layer's recurrent and conv state of `slot`.
  void Zero(int slot);
  // Copies every layer's recurrent and conv state of slot `src` into slot
  // `dst` (bit-exact; `src` is not modified). src == dst is a no-op.
  // REQUIRES: 0 <= src, dst < storage_slots().
  void Copy(int src, int dst);

  float* State(int slot, int layer);
  const float* State(int slot, int layer) const;
  float* Conv(int slot, int layer);  // REQUIRES: conv_floats > 0
  const float* Conv(int slot, int layer) const;

  int slots() const { return options_.slots; }
  int free_slots() const { return static_cast<int>(free_.size()); }
  int used_slots() const { return slots() - free_slots(); }
  // Bytes of one allocated slot (all layers, all shards).
  int64_t slot_bytes() const { return slot_floats_ * static_cast<int64_t>(sizeof(float)); }
  int64_t bytes() const { return slot_bytes() * options_.slots; }
  const StatePoolOptions& options() const { return options_; }
  // False for a bookkeeping-only pool (StatePoolOptions::allocate_storage).
  bool has_storage() const { return options_.allocate_storage; }

 private:
  size_t Offset(int slot, int layer) const;

  StatePoolOptions options_;
  int64_t layer_floats_ = 0;  // state_floats + conv_floats
  int64_t slot_floats_ = 0;   // layers * layer_floats_ (unsharded)
  int shards_ = 1;
  std::vector<float> storage_;
  std::vector<int> free_;  // LIFO free list
};

}  // namespace sy::engine
