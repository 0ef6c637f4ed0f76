#include "engine/eplb/placement.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>

namespace sy::engine {
namespace {

// The options after validation, with the policy resolved.
struct Shape {
  int layers;
  int experts;   // E
  int replicas;  // N
  int groups;    // G (1 under the global policy)
  int nodes;     // K (1 under the global policy)
  int devices;   // P
};

Status ValidateLoad(const EplbLoad& load) {
  if (load.empty()) return InvalidArgument("load: no layers (need a [layers x experts] matrix)");
  const size_t experts = load[0].size();
  if (experts == 0) return InvalidArgument("load: layer 0 has no experts");
  for (size_t l = 0; l < load.size(); ++l) {
    if (load[l].size() != experts) {
      return InvalidArgument("load: ragged matrix: layer " + std::to_string(l) + " has " +
                             std::to_string(load[l].size()) + " experts, layer 0 has " +
                             std::to_string(experts));
    }
    for (size_t e = 0; e < experts; ++e) {
      const double w = load[l][e];
      const std::string at = "load[" + std::to_string(l) + "][" + std::to_string(e) + "]";
      if (!std::isfinite(w)) return InvalidArgument(at + " is not finite");
      if (w < 0) {
        std::ostringstream v;  // shortest form: "-3", not "-3.000000"
        v << w;
        return InvalidArgument(at + " = " + v.str() + " is negative");
      }
    }
  }
  return Status::Ok();
}

Result<Shape> Resolve(const EplbLoad& load, const EplbOptions& o, EplbPolicy* applied) {
  RETURN_IF_ERROR(ValidateLoad(load));
  const int experts = static_cast<int>(load[0].size());
  const auto n = [](int v) { return std::to_string(v); };
  if (o.num_devices < 1)
    return InvalidArgument("num_devices must be >= 1, got " + n(o.num_devices));
  if (o.num_groups < 1) return InvalidArgument("num_groups must be >= 1, got " + n(o.num_groups));
  if (o.num_nodes < 1) return InvalidArgument("num_nodes must be >= 1, got " + n(o.num_nodes));
  if (o.num_replicas < experts) {
    return InvalidArgument("num_replicas (" + n(o.num_replicas) +
                           ") is less than the number of logical experts (" + n(experts) + ")");
  }
  if (o.num_replicas % o.num_devices != 0) {
    return InvalidArgument("num_replicas (" + n(o.num_replicas) +
                           ") is not a multiple of num_devices (" + n(o.num_devices) + ")");
  }
  const bool groups_fit_nodes = o.num_groups % o.num_nodes == 0;
  if (o.policy == EplbPolicy::kHierarchical && !groups_fit_nodes) {
    return InvalidArgument("num_groups (" + n(o.num_groups) + ") is not a multiple of num_nodes (" +
                           n(o.num_nodes) + "), required by the hierarchical policy");
  }
  const bool hierarchical =
      o.policy == EplbPolicy::kHierarchical || (o.policy == EplbPolicy::kAuto && groups_fit_nodes);
  *applied = hierarchical ? EplbPolicy::kHierarchical : EplbPolicy::kGlobal;
  if (!hierarchical) {
    return Shape{static_cast<int>(load.size()), experts, o.num_replicas, 1, 1, o.num_devices};
  }
  if (experts % o.num_groups != 0) {
    return InvalidArgument("num_groups (" + n(o.num_groups) +
                           ") does not divide the number of logical experts (" + n(experts) +
                           "), required by the hierarchical policy");
  }
  if (o.num_devices % o.num_nodes != 0) {
    return InvalidArgument("num_devices (" + n(o.num_devices) +
                           ") is not a multiple of num_nodes (" + n(o.num_nodes) +
                           "), required by the hierarchical policy");
  }
  return Shape{static_cast<int>(load.size()),
               experts,
               o.num_replicas,
               o.num_groups,
               o.num_nodes,
               o.num_devices};
}

// One layer of the placement.
struct LayerPlacement {
  std::vector<int> phy2log;
  std::vector<int> phy_rank;
  std::vector<int> logcnt;
};

LayerPlacement PlaceLayer(const std::vector<double>& w, const Shape& s) {
  const int group_size = s.experts / s.groups;
  const int groups_per_node = s.groups / s.nodes;
  const int experts_per_node = s.experts / s.nodes;
  const int phy_per_node = s.replicas / s.nodes;
  const int devices_per_node = s.devices / s.nodes;
  const int phy_per_device = s.replicas / s.devices;

  // Step 1: groups onto nodes. Node k's experts are renumbered ("mlog",
  // DeepSeek's name) k * E/K + r * group_size + j for its r-th group.
  std::vector<double> group_load(s.groups, 0.0);
  for (int e = 0; e < s.experts; ++e) group_load[e / group_size] += w[e];
  const EplbPacking groups = EplbBalancedPacking(group_load, s.nodes);
  std::vector<int> log2mlog(s.experts);
  std::vector<int> mlog2log(s.experts);
  for (int e = 0; e < s.experts; ++e) {
    const int g = e / group_size;
    const int mlog =
        (groups.pack[g] * groups_per_node + groups.rank_in_pack[g]) * group_size + e % group_size;
    log2mlog[e] = mlog;
    mlog2log[mlog] = e;
  }

  LayerPlacement out{std::vector<int>(s.replicas), std::vector<int>(s.replicas),
                     std::vector<int>(s.experts)};
  for (int node = 0; node < s.nodes; ++node) {
    const int mlog0 = node * experts_per_node;
    // Step 2: replicate the node's experts over the node's slots.
    std::vector<double> node_load(experts_per_node);
    for (int i = 0; i < experts_per_node; ++i) node_load[i] = w[mlog2log[mlog0 + i]];
    const EplbReplication rep = EplbReplicateExperts(node_load, phy_per_node);
    for (int i = 0; i < experts_per_node; ++i) out.logcnt[mlog2log[mlog0 + i]] = rep.logcnt[i];

    // Step 3: the node's physical experts onto its devices.
    std::vector<double> phy_load(phy_per_node);
    for (int p = 0; p < phy_per_node; ++p) {
      phy_load[p] = node_load[rep.phy2log[p]] / rep.logcnt[rep.phy2log[p]];
    }
    const EplbPacking devices = EplbBalancedPacking(phy_load, devices_per_node);
    for (int p = 0; p < phy_per_node; ++p) {
      const int slot =
          node * phy_per_node + devices.pack[p] * phy_per_device + devices.rank_in_pack[p];
      out.phy2log[slot] = mlog2log[mlog0 + rep.phy2log[p]];
      out.phy_rank[slot] = rep.rank[p];
    }
  }
  return out;
}

}  // namespace

std::string_view EplbPolicyName(EplbPolicy policy) {
  switch (policy) {
    case EplbPolicy::kAuto:
      return "auto";
    case EplbPolicy::kHierarchical:
      return "hierarchical";
    case EplbPolicy::kGlobal:
      return "global";
  }
  return "?";
}

Result<EplbPolicy> ParseEplbPolicy(std::string_view name) {
  for (EplbPolicy p : {EplbPolicy::kAuto, EplbPolicy::kHierarchical, EplbPolicy::kGlobal}) {
    if (name == EplbPolicyName(p)) return p;
  }
  return InvalidArgument("policy '" + std::string(name) +
                         "' is not one of auto, hierarchical, global");
}

EplbPacking EplbBalancedPacking(const std::vector<double>& weight, int num_packs) {
  const int n = static_cast<int>(weight.size());
  assert(num_packs >= 1 && n % num_packs == 0);
  const int per_pack = n / num_packs;
  EplbPacking out{std::vector<int>(n), std::vector<int>(n, 0)};
  if (per_pack == 1) {  // the reference's shortcut: item i alone in pack i
    std::iota(out.pack.begin(), out.pack.end(), 0);
    return out;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return weight[a] > weight[b]; });
  std::vector<double> pack_weight(num_packs, 0.0);
  std::vector<int> pack_items(num_packs, 0);
  for (int item : order) {
    int best = -1;
    for (int p = 0; p < num_packs; ++p) {
      if (pack_items[p] < per_pack && (best < 0 || pack_weight[p] < pack_weight[best])) best = p;
    }
    assert(best >= 0);
    out.pack[item] = best;
    out.rank_in_pack[item] = pack_items[best]++;
    pack_weight[best] += weight[item];
  }
  return out;
}

EplbReplication EplbReplicateExperts(const std::vector<double>& weight, int num_phy) {
  const int num_log = static_cast<int>(weight.size());
  assert(num_phy >= num_log);
  EplbReplication out{std::vector<int>(num_phy), std::vector<int>(num_phy, 0),
                      std::vector<int>(num_log, 1)};
  std::iota(out.phy2log.begin(), out.phy2log.begin() + num_log, 0);
  for (int slot = num_log; slot < num_phy; ++slot) {
    int best = 0;
    for (int e = 1; e < num_log; ++e) {
      if (weight[e] / out.logcnt[e] > weight[best] / out.logcnt[best]) best = e;
    }
    out.phy2log[slot] = best;
    out.rank[slot] = out.logcnt[best]++;
  }
  return out;
}

std::vector<double> EplbDeviceLoads(const std::vector<double>& load_row,
                                    const std::vector<int>& phy2log_row, int num_devices) {
  assert(num_devices >= 1 && phy2log_row.size() % num_devices == 0);
  std::vector<int> count(load_row.size(), 0);
  for (int e : phy2log_row) ++count[e];
  const size_t per_device = phy2log_row.size() / num_devices;
  std::vector<double> device(num_devices, 0.0);
  for (size_t slot = 0; slot < phy2log_row.size(); ++slot) {
    const int e = phy2log_row[slot];
    device[slot / per_device] += load_row[e] / count[e];
  }
  return device;
}

double EplbBalancedness(const std::vector<double>& device_load) {
  assert(!device_load.empty());
  double sum = 0, max = 0;
  for (double d : device_load) {
    sum += d;
    max = std::max(max, d);
  }
  if (max <= 0) return 1.0;
  return sum / static_cast<double>(device_load.size()) / max;
}

Result<EplbPlacement> RebalanceExperts(const EplbLoad& load, const EplbOptions& options) {
  EplbPlacement out;
  ASSIGN_OR_RETURN(const Shape s, Resolve(load, options, &out.policy));
  out.num_devices = s.devices;
  int max_cnt = 1;
  for (const std::vector<double>& row : load) {
    LayerPlacement layer = PlaceLayer(row, s);
    max_cnt = std::max(max_cnt, *std::max_element(layer.logcnt.begin(), layer.logcnt.end()));
    out.balancedness.push_back(EplbBalancedness(EplbDeviceLoads(row, layer.phy2log, s.devices)));
    out.phy2log.push_back(std::move(layer.phy2log));
    out.phy_rank.push_back(std::move(layer.phy_rank));
    out.logcnt.push_back(std::move(layer.logcnt));
  }
  // log2phy's last dimension is the largest replica count over all layers,
  // as in the reference (one tensor for the whole model).
  out.log2phy.assign(s.layers,
                     std::vector<std::vector<int>>(s.experts, std::vector<int>(max_cnt, -1)));
  for (int l = 0; l < s.layers; ++l) {
    for (int slot = 0; slot < s.replicas; ++slot) {
      out.log2phy[l][out.phy2log[l][slot]][out.phy_rank[l][slot]] = slot;
    }
  }
  return out;
}

Result<EplbPlacement> RebalanceExperts(const std::vector<std::vector<int64_t>>& load,
                                       const EplbOptions& options) {
  EplbLoad as_double(load.size());
  for (size_t l = 0; l < load.size(); ++l) as_double[l].assign(load[l].begin(), load[l].end());
  return RebalanceExperts(as_double, options);
}

}  // namespace sy::engine
