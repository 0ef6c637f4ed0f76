#include "engine/moe/layout.h"

#include <cassert>

namespace sy::engine {

ExpertLayout ExpertLayout::RoundRobin(int experts, int devices) {
  assert(experts >= 1 && devices >= 1);
  std::vector<int> map(experts);
  for (int e = 0; e < experts; ++e) map[e] = e % devices;
  return ExpertLayout(std::move(map), devices);
}

ExpertLayout::ExpertLayout(std::vector<int> expert_device, int devices)
    : expert_device_(std::move(expert_device)), devices_(devices) {
  for ([[maybe_unused]] int d : expert_device_) assert(d >= 0 && d < devices_);
}

std::vector<int> ExpertLayout::local_experts(int device) const {
  std::vector<int> out;
  for (int e = 0; e < experts(); ++e) {
    if (expert_device_[e] == device) out.push_back(e);
  }
  return out;
}

}  // namespace sy::engine
