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
  storage_.assign(static_cast<size_t>(slot_floats_) * options_.slots, 0.0f);
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
  assert(slot >= 0 && slot < options_.slots);
  float* p = &storage_[static_cast<size_t>(slot) * slot_floats_];
  std::fill(p, p + slot_floats_, 0.0f);
}

void StatePool::Copy(int src, int dst) {
  assert(src >= 0 && src < options_.slots && dst >= 0 && dst < options_.slots);
  if (src == dst) return;
  const float* from = &storage_[static_cast<size_t>(src) * slot_floats_];
  std::copy(from, from + slot_floats_, &storage_[static_cast<size_t>(dst) * slot_floats_]);
}

size_t StatePool::Offset(int slot, int layer) const {
  assert(slot >= 0 && slot < options_.slots && layer >= 0 && layer < options_.layers);
  return static_cast<size_t>(slot) * slot_floats_ + static_cast<size_t>(layer) * layer_floats_;
}

float* StatePool::State(int slot, int layer) { return &storage_[Offset(slot, layer)]; }
const float* StatePool::State(int slot, int layer) const { return &storage_[Offset(slot, layer)]; }
float* StatePool::Conv(int slot, int layer) {
  assert(options_.conv_floats > 0);
  return &storage_[Offset(slot, layer) + options_.state_floats];
}
const float* StatePool::Conv(int slot, int layer) const {
  assert(options_.conv_floats > 0);
  return &storage_[Offset(slot, layer) + options_.state_floats];
}

}  // namespace sy::engine
