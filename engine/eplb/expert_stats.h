// File: engine/eplb/expert_stats.h
//
// ExpertStats: the expert load recorder (SGLang's expert distribution
// recorder, seed 004 "Expert Workload Extraction and Simulation"). It keeps
// the routed-token counts per layer per logical expert of every step over
// sliding windows (default the last 10 / 100 / 1000 recorded steps) and since
// construction, and answers what a rebalance and the console need: the load
// of a window, how balanced it is over the devices of a placement, the hottest
// experts, and a JSON dump that `moe-engine eplb --stats FILE` reads back.
//
// Placement: where a logical expert's tokens land. Physical slots per layer,
// each holding one logical expert (phy2log) on one device (phy_device). A
// logical expert with several replicas splits its tokens evenly over them.
//
//   ASSIGN_OR_RETURN(ExpertStats stats, ExpertStats::Create(layers, experts));
//   ASSIGN_OR_RETURN(Placement p, Placement::FromExpertDevice(runner.expert_device(),
//                                                            runner.devices(), layers));
//   RETURN_IF_ERROR(stats.Record(step, out.expert_counts, &p));   // once per step
//   ASSIGN_OR_RETURN(Balancedness b, stats.WindowBalancedness(100, p));
//   RETURN_IF_ERROR(stats.DumpJson("/tmp/load.json", 1000, p));
//
// Thread-safety: Placement is an immutable value (share freely). ExpertStats
// is owned by the engine loop: Record mutates it; const queries may run
// concurrently with each other but not with Record.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy::engine::eplb {

// [layer][expert] token counts, the shape of StepOutput::expert_counts.
using LoadMatrix = std::vector<std::vector<int64_t>>;

class Placement {
 public:
  // The general form: phy2log[layer][slot] is the logical expert in that
  // physical slot, phy_device[layer][slot] the device holding the slot. Layers
  // may differ in slot count. REQUIRES (else InvalidArgument): devices >= 1,
  // at least one layer, equal shapes of the two tables, devices in [0, devices),
  // logical ids >= 0, and every logical id in [0, experts()) has a replica in
  // every layer, where experts() = 1 + the largest id of layer 0 (all layers
  // must agree).
  static Result<Placement> Create(std::vector<std::vector<int>> phy2log,
                                  std::vector<std::vector<int>> phy_device, int devices);
  // The EPLB form: slots device-major, slot s on device s / (N / devices).
  // REQUIRES: every layer has N slots with N % devices == 0, N >= devices.
  static Result<Placement> FromDeviceMajor(std::vector<std::vector<int>> phy2log, int devices);
  // One slot per logical expert (an expert -> device table): slot e holds
  // expert e on expert_device[e] (round-robin e % P is not device-major, hence
  // the general form), the same in each of `layers` layers.
  static Result<Placement> FromExpertDevice(const std::vector<int>& expert_device, int devices,
                                            int layers);

  int layers() const { return static_cast<int>(phy2log_.size()); }
  int experts() const { return experts_; }
  int devices() const { return devices_; }
  const std::vector<std::vector<int>>& phy2log() const { return phy2log_; }
  const std::vector<std::vector<int>>& phy_device() const { return phy_device_; }
  // Number of physical slots holding `expert` in `layer` (>= 1).
  int replicas(int layer, int expert) const { return replica_count_[layer][expert]; }

  // Adds one layer's tokens per logical expert to per-device load. An expert
  // with t tokens and r replicas gives each replica t / r tokens and one more
  // to each of its first t % r replicas in ascending slot order, so the split
  // is deterministic and the layer's total is kept exactly.
  // REQUIRES: 0 <= layer < layers(), tokens.size() == experts(),
  // device_load.size() == devices(). Allocates nothing.
  void AddLayerLoad(int layer, std::span<const int64_t> tokens,
                    std::span<int64_t> device_load) const;

 private:
  Placement() = default;
  std::vector<std::vector<int>> phy2log_;
  std::vector<std::vector<int>> phy_device_;
  std::vector<std::vector<int>> replica_count_;  // [layer][expert]
  std::vector<std::vector<int>> replica_rank_;   // [layer][slot]: index among its expert's slots
  int experts_ = 0;
  int devices_ = 0;
};

// mean / max of per-device load for each layer (1.0 = perfectly balanced;
// 1.0 also for a layer without tokens), and their mean over layers.
struct Balancedness {
  std::vector<double> per_layer;
  double mean = 1.0;
};

struct HotExpert {
  int layer = 0;
  int expert = 0;
  int64_t tokens = 0;
  double share = 0;  // tokens / all tokens of that layer in the window
};

class ExpertStats {
 public:
  // Pass as a window to mean "every step since construction".
  static constexpr int kAll = 0;

  // REQUIRES (else InvalidArgument): layers >= 1, experts >= 1, a non-empty
  // list of windows each in [1, 1'000'000]. Windows are sorted and deduplicated;
  // the largest is the ring capacity. Memory is allocated here, once:
  // capacity * layers * experts * 4 bytes for the per-step counts plus one
  // running sum per window, so Record never allocates.
  static Result<ExpertStats> Create(int layers, int experts,
                                    std::vector<int> windows = {10, 100, 1000});

  // Adds one step's counts. `step` must exceed the previous recorded step
  // (gaps allowed: windows count recorded steps, not step ids). Counts must be
  // [layers][experts] with each value in [0, INT32_MAX]. With a placement,
  // that step's balancedness is recorded too (StepBalancedness). On error
  // nothing is recorded (InvalidArgument naming the offending index).
  // O(layers * experts * windows + slots); no allocation.
  Status Record(int64_t step, const LoadMatrix& counts, const Placement* placement = nullptr);

  int layers() const { return layers_; }
  int experts() const { return experts_; }
  const std::vector<int>& windows() const { return windows_; }
  int capacity() const { return capacity_; }
  // Steps recorded since construction (not capped by the capacity).
  int64_t steps_recorded() const { return recorded_; }
  // Steps a window covers now: min(window, recorded), all recorded for kAll.
  int64_t WindowSteps(int window) const;

  // [layer][expert] sums over the last min(window, recorded) steps; kAll gives
  // Accumulated(). A configured window is a copy of a running sum; any other
  // window up to capacity() is summed from the ring. InvalidArgument for a
  // negative window or one above capacity().
  Result<LoadMatrix> Window(int window) const;
  LoadMatrix Accumulated() const;

  // Per-device load [layer][device] of a window under `placement`.
  // InvalidArgument when the placement's layers/experts differ from ours.
  Result<std::vector<std::vector<int64_t>>> DeviceLoad(int window,
                                                       const Placement& placement) const;
  // Balancedness of a window's summed load under `placement` (what the devices
  // would have seen had that placement served the whole window).
  Result<Balancedness> WindowBalancedness(int window, const Placement& placement) const;
  // Average of the per-step balancedness recorded with a placement over the
  // last min(window, recorded) steps (SGLang's "last_N_average_balancedness");
  // steps recorded without one are skipped, and kAll covers only the last
  // capacity() steps. FailedPrecondition when no step of the window has one.
  Result<Balancedness> StepBalancedness(int window) const;

  // The k (layer, expert) pairs with the most tokens in the window, most first,
  // ties by layer then expert ascending; pairs with no tokens are left out, so
  // fewer than k may come back.
  Result<std::vector<HotExpert>> Hottest(int window, int k) const;

  // The dump: {"load": [[...]], "window": w, "window_steps": n,
  // "steps_recorded": n, "first_step", "last_step" (null when empty),
  // "layers", "experts", "placement": {"phy2log", "phy_device", "devices"},
  // "balancedness": [...], "balancedness_mean", "step_balancedness": [...] or
  // null, "hottest": [{"layer", "expert", "tokens", "share"}]}. "load" is what
  // `moe-engine eplb --stats` reads.
  Result<std::string> ToJson(int window, const Placement& placement, int hottest_k = 10) const;
  // Writes ToJson to `path` atomically (a temporary file beside it, fsync,
  // rename): a reader sees the old file or the new one, never half of one.
  // Unavailable (ResourceExhausted when the disk is full) naming the path.
  Status DumpJson(const std::string& path, int window, const Placement& placement,
                  int hottest_k = 10) const;

  // Bytes reserved by the ring and the sums; stable after Create (tests).
  size_t ReservedBytes() const;

 private:
  ExpertStats() = default;
  Status CheckWindow(int window) const;
  Status CheckPlacement(const Placement& placement) const;
  // Ring row of the i-th most recent step (0 = newest). REQUIRES: i < min(recorded, capacity).
  int RowOf(int64_t i) const;
  const int32_t* Row(int row) const { return &ring_[static_cast<size_t>(row) * cells_]; }

  int layers_ = 0;
  int experts_ = 0;
  size_t cells_ = 0;  // layers * experts
  int capacity_ = 0;
  std::vector<int> windows_;
  std::vector<int32_t> ring_;                 // [capacity][layers * experts]
  std::vector<int64_t> ring_step_;            // [capacity] step id of each row
  std::vector<double> ring_balance_;          // [capacity][layers]
  std::vector<uint8_t> ring_has_balance_;     // [capacity]
  std::vector<std::vector<int64_t>> sums_;    // [window index][layers * experts]
  std::vector<int64_t> accumulated_;          // [layers * experts]
  std::vector<int64_t> scratch_device_load_;  // grows to the largest devices() seen
  int64_t recorded_ = 0;
  int64_t first_step_ = 0;
  int64_t last_step_ = 0;
};

}  // namespace sy::engine::eplb
