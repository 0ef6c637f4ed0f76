// File: engine/moe/layout.h
//
// ExpertLayout: which device owns each routed expert, kept as data (an
// expert -> device table) so that a placement other than round-robin (EPLB)
// can replace it without touching the dispatcher.
//
//   ExpertLayout layout = ExpertLayout::RoundRobin(/*experts=*/16, /*devices=*/4);
//   layout.device_of(5);        // 1
//   layout.local_experts(1);    // {1, 5, 9, 13}
//
// Thread-safety: immutable value; share freely.
#pragma once

#include <vector>

namespace sy::engine {

class ExpertLayout {
 public:
  // Expert e on device e % devices. REQUIRES: experts >= 1, devices >= 1.
  static ExpertLayout RoundRobin(int experts, int devices);
  // REQUIRES: every entry in [0, devices).
  ExpertLayout(std::vector<int> expert_device, int devices);

  int experts() const { return static_cast<int>(expert_device_.size()); }
  int devices() const { return devices_; }
  int device_of(int expert) const { return expert_device_[expert]; }
  const std::vector<int>& expert_device() const { return expert_device_; }
  // Experts owned by `device`, ascending.
  std::vector<int> local_experts(int device) const;

 private:
  std::vector<int> expert_device_;
  int devices_;
};

}  // namespace sy::engine
