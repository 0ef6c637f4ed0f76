// File: engine/eplb/rebalance_plan.h
//
// PlanRebalance: what a live rebalance would do, computed before anything
// moves (the `rebalance --dry-run` table). From the load of a recorded
// window (ExpertStats) and the live placement (ExpertMap) it runs EPLB
// (RebalanceExperts) with the live slot count, then
//   - orders each device's new experts so that a slot already holding an
//     expert keeps it (a device's slot order is free; this minimises copies),
//   - keeps a layer's current row when the new one would not raise its
//     balancedness (moving weights for nothing only costs bandwidth),
// and reports per MoE layer the balancedness before and after (both measured
// with ExpertStats::WindowBalancedness, so they compare like with like) and
// how many slots change their expert.
//
//   ASSIGN_OR_RETURN(RebalancePlan plan,
//                    PlanRebalance(stats, runner->expert_map(), {.window = 100}, expert_bytes));
//   nlohmann::json table = PlanJson(plan);
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/eplb/expert_stats.h"
#include "engine/eplb/placement.h"
#include "engine/moe/expert_map.h"

namespace sy::engine::eplb {

struct RebalanceOptions {
  int window = 100;  // recorded steps whose load is balanced (ExpertStats window, <= capacity)
  EplbPolicy policy = EplbPolicy::kAuto;
  int num_groups = 1;  // expert groups (the model's n_group)
  int num_nodes = 1;
};

struct LayerPlan {
  int layer = 0;        // model layer
  double before = 1.0;  // balancedness of the window under the live row
  double after = 1.0;   // ... under the planned row
  int moved = 0;        // slots whose logical expert changes
};

struct RebalancePlan {
  int window = 0;                         // the window asked for
  int64_t window_steps = 0;               // steps it covered
  std::vector<std::vector<int>> phy2log;  // [model layer][slot]: the target map rows
  std::vector<LayerPlan> layers;          // MoE layers, ascending
  int experts_moved = 0;                  // sum of moved
  int64_t bytes = 0;                      // experts_moved * bytes of one expert
  double mean_before = 1.0;               // over MoE layers
  double mean_after = 1.0;
  // MoE layers whose row changes, ascending (the layers a rebalance stages).
  std::vector<int> ChangedLayers() const;
};

// FAILED_PRECONDITION when the window holds no recorded step or the map's
// devices hold unequal slot counts; INVALID_ARGUMENT for a bad window or
// options EPLB refuses (the message names it).
Result<RebalancePlan> PlanRebalance(const ExpertStats& stats, const ExpertMap& map,
                                    const RebalanceOptions& options, int64_t expert_bytes);

// {"layers": [{"layer", "before", "after", "moved"}], "experts_moved",
//  "bytes", "window", "window_steps", "mean_before", "mean_after"}
nlohmann::json PlanJson(const RebalancePlan& plan);

// The start-up placement with `redundant` extra slots (--redundant-experts):
// expert e on device e % P where it fits, then one replica each of experts
// 0, 1, ... on the next device with room that does not hold it yet; the same
// row in every layer (dense rows included). INVALID_ARGUMENT naming the flag
// when experts + redundant does not divide over the devices or redundant < 0.
Result<std::vector<std::vector<int>>> InitialPlacement(int layers, int experts, int devices,
                                                       int redundant);

// The stats' Placement for a live map (slot devices repeated per layer).
Result<Placement> PlacementOf(const ExpertMap& map);

}  // namespace sy::engine::eplb
