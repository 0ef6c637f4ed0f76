#include "engine/pools/state_pool.h"

#include <algorithm>
#include <cassert>

namespace sy::engine {

StatePool::StatePool(const StatePoolOptions& options)
    : options_(options),
      layer_floats_(options.state_floats + options.conv_floats),
      slot_floats_(static_cast<int64_t>(options.layers) * layer_floats_) {
  assert(options.slots >= 0 && options.layers >= 0 && options.state_floats >= 0 &&
         options.conv_floats >= 0);
  if (slot_floats_ == 0) options_.slots = 0;
  if (options_.allocate_storage) {
    storage_.assign(static_cast<size_t>(slot_floats_) * options_.slots, 0.0f);
  }
  free_.reserve(options_.slots);
  // Highest id first so that Allocate hands out 0, 1, 2, ... on a fresh pool.
  for (int s = options_.slots - 1; s >= 0; --s) free_.push_back(s);
}

Result<int> StatePool::Allocate() {
  if (free_.empty()) {
    return ResourceExhausted("recurrent-state pool has no free slot (" +
                             std::to_string(options_.slots) + " in use)");
  }
  const int s = free_.back();
  free_.pop_back();
  return s;
}

void StatePool::Free(int slot) {
  assert(slot >= 0 && slot < options_.slots);
  assert(std::find(free_.begin(), free_.end(), slot) == free_.end() && "slot freed twice");
  free_.push_back(slot);
}

void StatePool::Zero(int slot) {
  float* p = SlotData(slot);
  std::fill(p, p + slot_floats(), 0.0f);
}

void StatePool::Copy(int src, int dst) {
  if (src == dst) return;
  const float* from = SlotData(src);
  std::copy(from, from + slot_floats(), SlotData(dst));
}

std::vector<int> StatePool::UsedSlots() const {
  std::vector<char> is_free(options_.slots, 0);
  for (int s : free_) is_free[s] = 1;
  std::vector<int> used;
  used.reserve(options_.slots - free_.size());
  for (int s = 0; s < options_.slots; ++s) {
    if (!is_free[s]) used.push_back(s);
  }
  return used;
}

Status StatePool::SetShards(int shards) {
  const int groups = options_.conv_groups;
  const bool conv_ok =
      options_.conv_floats == 0 || (groups > 0 && options_.conv_floats % groups == 0 &&
                                    (options_.conv_floats / groups) % shards == 0);
  if (shards < 1 || options_.state_floats % shards != 0 || !conv_ok) {
    return InvalidArgument("cannot shard a recurrent state of " +
                           std::to_string(options_.state_floats) + " floats and a conv state of " +
                           std::to_string(options_.conv_floats) + " floats in " +
                           std::to_string(groups) + " groups " + std::to_string(shards) + " ways");
  }
  shards_ = shards;
  return Status::Ok();
}

float* StatePool::SlotData(int slot) {
  assert(has_storage());
  assert(slot >= 0 && slot < storage_slots());
  return storage_.data() + static_cast<size_t>(slot) * slot_floats();
}

const float* StatePool::SlotData(int slot) const {
  assert(has_storage());
  assert(slot >= 0 && slot < storage_slots());
  return storage_.data() + static_cast<size_t>(slot) * slot_floats();
}

size_t StatePool::Offset(int slot, int layer) const {
  assert(has_storage());
  assert(slot >= 0 && slot < storage_slots() && layer >= 0 && layer < options_.layers);
  return static_cast<size_t>(slot) * slot_floats() +
         static_cast<size_t>(layer) * (layer_floats_ / shards_);
}

float* StatePool::State(int slot, int layer) { return &storage_[Offset(slot, layer)]; }
const float* StatePool::State(int slot, int layer) const { return &storage_[Offset(slot, layer)]; }
float* StatePool::Conv(int slot, int layer) {
  assert(options_.conv_floats > 0);
  return &storage_[Offset(slot, layer) + state_floats()];
}
const float* StatePool::Conv(int slot, int layer) const {
  assert(options_.conv_floats > 0);
  return &storage_[Offset(slot, layer) + state_floats()];
}

}  // namespace sy::engine
