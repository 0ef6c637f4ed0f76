// File: engine/parallelism/state_blocks.h
//
// The block arithmetic behind ReshardState (state_reshard.h), internal to
// engine/parallelism: how one KV page or one recurrent-state slot of the
// data-parallel (EP) reading splits into P blocks, and the pack / place /
// checksum loops over a pool's used units in either reading.
//
// A unit (page or slot) of the EP reading is `count` repeats of a period of
// `period` floats; the period is a list of segments, each split P ways.
// Block q of the unit is, for every repeat and every segment in order, the
// q-th P-th of the segment; the sharded reading stores block q contiguously
// (kv_pool.h and state_pool.h "Shards"):
//
//   KV page     count = layers * entries * page_size, period = row,
//               segments {row}
//   state slot  count = layers, period = state + conv,
//               segments {state, conv group 0, ..., conv group G-1}
//
// A BlockStore is one pool seen through that split: the storage base (the
// same address in both readings), the units per home N, and the used unit
// ids of every home (ascending). EP unit p sits at p * unit_floats; sharded
// unit d * N + p at (d * N + p) * block_floats.
//
// Messages: a message between home h and a rank is, for every store in
// order, for every used unit of home h (ascending), one block. EP -> TP rank
// r sends peer q block q of its units (PackEp) and places home d's message
// into sharded units d * N + p (PlaceSharded); TP -> EP rank r sends home d
// its sharded units of d (PackSharded) and home r joins the blocks of every
// rank q (PlaceEp). A rank's own send buffers are therefore the message set
// of the inverse direction, which is how a failed place is rolled back.
//
// Thread-safety: plain functions over one rank's pools; no shared state.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace sy::engine::state_blocks {

struct UnitSplit {
  int parts = 1;       // P
  int64_t count = 0;   // repeats of the period per unit
  int64_t period = 0;  // floats of one period (EP reading)
  // (offset in the period, floats); every length divisible by `parts`.
  std::vector<std::pair<int64_t, int64_t>> segments;

  int64_t unit_floats() const { return count * period; }
  int64_t block_floats() const { return unit_floats() / parts; }
  // Copies block q of the EP unit at `unit` to out[0, block_floats()).
  void Gather(const float* unit, int q, float* out) const;
  // The inverse: writes in[0, block_floats()) as block q of `unit`.
  void Scatter(const float* in, int q, float* unit) const;
  // Fills block q of `unit` with NaN (a torn write in tests of atomicity).
  void Poison(int q, float* unit) const;
};

struct BlockStore {
  float* base = nullptr;  // storage start; null when the pool has no units
  int units = 0;          // N: units per home
  UnitSplit split;
  std::vector<std::vector<int>> used;  // [home]: used unit ids, ascending

  float* ep(int p) const { return base + static_cast<int64_t>(p) * split.unit_floats(); }
  float* sharded(int home, int p) const {
    return base + (static_cast<int64_t>(home) * units + p) * split.block_floats();
  }
};

// Floats of the message about home `home`'s used units.
int64_t MessageFloats(const std::vector<BlockStore>& stores, int home);

// send[q] = the message about home `rank`: block q of each of its units.
// `peers` < P stops after the first `peers` messages (the rest left empty).
void PackEp(const std::vector<BlockStore>& stores, int rank, int peers,
            std::vector<std::vector<float>>* send);
// send[d] = the message about home d: this rank's sharded units of d.
void PackSharded(const std::vector<BlockStore>& stores, int peers,
                 std::vector<std::vector<float>>* send);
// Writes msgs[d] (d < sources) into the sharded units of home d; with
// `poison_rest` the sharded units of homes d >= sources become NaN.
// REQUIRES: msgs[d].size() == MessageFloats(stores, d) for d < sources.
void PlaceSharded(const std::vector<BlockStore>& stores,
                  const std::vector<std::vector<float>>& msgs, int sources, bool poison_rest);
// Writes msgs[q] (q < sources) as block q of home `rank`'s EP units; with
// `poison_rest` blocks q >= sources become NaN.
// REQUIRES: msgs[q].size() == MessageFloats(stores, rank) for q < sources.
void PlaceEp(const std::vector<BlockStore>& stores, int rank,
             const std::vector<std::vector<float>>& msgs, int sources, bool poison_rest);

// 64-bit FNV-1a over this rank's used storage: EP reading, home `rank`'s
// units (every store, ascending ids); sharded reading, units d * N + p for
// every home d and its used p. One 32-bit word per step, as
// UnifiedExpertBuffer::Checksum.
uint64_t ChecksumEp(const std::vector<BlockStore>& stores, int rank);
uint64_t ChecksumSharded(const std::vector<BlockStore>& stores);

}  // namespace sy::engine::state_blocks
