#include "engine/eplb/rebalance_plan.h"

#include <algorithm>
#include <string>
#include <utility>

namespace sy::engine::eplb {

namespace {

// The new experts of one device in slot order: a slot keeps its current
// expert when the new multiset still has it; the rest fill the freed slots in
// ascending order of the new list.
std::vector<int> KeepInPlace(const std::vector<int>& current, std::vector<int> wanted) {
  const size_t n = current.size();
  std::vector<int> out(n, -1);
  std::vector<bool> used(wanted.size(), false);
  for (size_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < wanted.size(); ++i) {
      if (!used[i] && wanted[i] == current[k]) {
        out[k] = wanted[i];
        used[i] = true;
        break;
      }
    }
  }
  size_t next = 0;
  for (size_t k = 0; k < n; ++k) {
    if (out[k] >= 0) continue;
    while (used[next]) ++next;
    out[k] = wanted[next];
    used[next] = true;
  }
  return out;
}

Result<Balancedness> Measure(const ExpertStats& stats, int window, const ExpertMap& map,
                             const std::vector<std::vector<int>>& rows) {
  std::vector<std::vector<int>> devices(rows.size(), map.slot_device_row());
  ASSIGN_OR_RETURN(Placement p, Placement::Create(rows, std::move(devices), map.devices()));
  return stats.WindowBalancedness(window, p);
}

}  // namespace

std::vector<int> RebalancePlan::ChangedLayers() const {
  std::vector<int> out;
  for (const LayerPlan& l : layers) {
    if (l.moved > 0) out.push_back(l.layer);
  }
  return out;
}

Result<std::vector<std::vector<int>>> InitialPlacement(int layers, int experts, int devices,
                                                       int redundant) {
  if (redundant < 0 || (experts + redundant) % devices != 0) {
    return InvalidArgument(
        "--redundant-experts: experts + redundant = " + std::to_string(experts + redundant) +
        " physical slots must divide evenly over " + std::to_string(devices) + " devices");
  }
  // Round-robin where it fits (expert e on device e % P, as without
  // redundancy), then replicas of experts 0, 1, ... each on the first device
  // with room that does not hold that expert yet: no load is known at start,
  // so spread the copies rather than guess (EPLB over a uniform load would
  // stack an expert's replicas on one device, where they help nothing).
  const int per_device = (experts + redundant) / devices;
  std::vector<std::vector<int>> on(devices);
  const auto place = [&](int e, int first) {
    for (int i = 0; i < devices; ++i) {
      const int d = (first + i) % devices;
      if (static_cast<int>(on[d].size()) < per_device &&
          std::find(on[d].begin(), on[d].end(), e) == on[d].end()) {
        on[d].push_back(e);
        return;
      }
    }
    for (int i = 0; i < devices; ++i) {  // every device with room holds e already
      const int d = (first + i) % devices;
      if (static_cast<int>(on[d].size()) < per_device) {
        on[d].push_back(e);
        return;
      }
    }
  };
  for (int e = 0; e < experts; ++e) place(e, e % devices);
  for (int r = 0; r < redundant; ++r) place(r % experts, (r % experts) % devices + 1);
  std::vector<int> row;
  for (const std::vector<int>& d : on) row.insert(row.end(), d.begin(), d.end());
  return std::vector<std::vector<int>>(layers, row);
}

Result<Placement> PlacementOf(const ExpertMap& map) {
  std::vector<std::vector<int>> rows, devices;
  for (int l = 0; l < map.layers(); ++l) {
    rows.push_back(map.phy2log_row(l));
    devices.push_back(map.slot_device_row());
  }
  return Placement::Create(std::move(rows), std::move(devices), map.devices());
}

Result<RebalancePlan> PlanRebalance(const ExpertStats& stats, const ExpertMap& map,
                                    const RebalanceOptions& options, int64_t expert_bytes) {
  if (!map.uniform()) {
    return FailedPrecondition(
        "rebalance needs the same number of expert slots on every device (" +
        std::to_string(map.slots()) + " slots over " + std::to_string(map.devices()) +
        " devices); start the engine with --redundant-experts so that they divide evenly");
  }
  if (stats.layers() != map.layers() || stats.experts() != map.experts()) {
    return InvalidArgument("expert statistics cover " + std::to_string(stats.layers()) + "x" +
                           std::to_string(stats.experts()) + " but the placement has " +
                           std::to_string(map.layers()) + "x" + std::to_string(map.experts()));
  }
  ASSIGN_OR_RETURN(LoadMatrix load, stats.Window(options.window));
  RebalancePlan plan;
  plan.window = options.window;
  plan.window_steps = stats.WindowSteps(options.window);
  if (plan.window_steps == 0) {
    return FailedPrecondition(
        "no routed-token statistics recorded yet: serve some steps "
        "before rebalancing");
  }
  const int first = map.first_moe();
  std::vector<std::vector<int64_t>> moe_load(load.begin() + first, load.end());
  EplbOptions eo{.num_replicas = map.slots(),
                 .num_groups = options.num_groups,
                 .num_nodes = options.num_nodes,
                 .num_devices = map.devices(),
                 .policy = options.policy};
  ASSIGN_OR_RETURN(EplbPlacement eplb, RebalanceExperts(moe_load, eo));

  std::vector<std::vector<int>> current;
  for (int l = 0; l < map.layers(); ++l) current.push_back(map.phy2log_row(l));
  plan.phy2log = current;
  const int per_device = map.slots() / map.devices();
  for (int l = first; l < map.layers(); ++l) {
    std::vector<int>& row = plan.phy2log[l];
    const std::vector<int>& target = eplb.phy2log[l - first];
    for (int d = 0; d < map.devices(); ++d) {
      const int s0 = map.device_first_slot(d);
      std::vector<int> cur(current[l].begin() + s0, current[l].begin() + s0 + per_device);
      std::vector<int> want(target.begin() + d * per_device, target.begin() + (d + 1) * per_device);
      std::vector<int> placed = KeepInPlace(cur, std::move(want));
      std::copy(placed.begin(), placed.end(), row.begin() + s0);
    }
  }
  ASSIGN_OR_RETURN(Balancedness before, Measure(stats, options.window, map, current));
  ASSIGN_OR_RETURN(Balancedness after, Measure(stats, options.window, map, plan.phy2log));
  double sum_before = 0, sum_after = 0;
  for (int l = first; l < map.layers(); ++l) {
    LayerPlan lp{.layer = l, .before = before.per_layer[l], .after = after.per_layer[l]};
    if (lp.after <= lp.before + 1e-12) {
      plan.phy2log[l] = current[l];  // no gain: move nothing
      lp.after = lp.before;
    } else {
      for (int s = 0; s < map.slots(); ++s) lp.moved += plan.phy2log[l][s] != current[l][s];
    }
    sum_before += lp.before;
    sum_after += lp.after;
    plan.experts_moved += lp.moved;
    plan.layers.push_back(lp);
  }
  const int moe_layers = map.layers() - first;
  if (moe_layers > 0) {
    plan.mean_before = sum_before / moe_layers;
    plan.mean_after = sum_after / moe_layers;
  }
  plan.bytes = plan.experts_moved * expert_bytes;
  return plan;
}

nlohmann::json PlanJson(const RebalancePlan& plan) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerPlan& l : plan.layers) {
    layers.push_back(
        {{"layer", l.layer}, {"before", l.before}, {"after", l.after}, {"moved", l.moved}});
  }
  return {{"layers", std::move(layers)},
          {"experts_moved", plan.experts_moved},
          {"bytes", plan.bytes},
          {"window", plan.window},
          {"window_steps", plan.window_steps},
          {"mean_before", plan.mean_before},
          {"mean_after", plan.mean_after}};
}

}  // namespace sy::engine::eplb
