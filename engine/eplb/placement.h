// File: engine/eplb/placement.h
//
// The Expert Parallelism Load Balancer (EPLB) placement: a pure function from
// a load matrix [layers x logical experts] to a physical placement with
// redundant experts, following DeepSeek's reference algorithm
// (deepseek-ai/EPLB, eplb.py: rebalance_experts) step for step, including its
// tie-breaking, so the same matrix gives the same placement.
//
//   EplbOptions o{.num_replicas = 16, .num_groups = 4, .num_nodes = 2,
//                 .num_devices = 8, .policy = EplbPolicy::kAuto};
//   Result<EplbPlacement> p = RebalanceExperts(load, o);
//   p->phy2log[layer][slot];      // logical expert held by physical slot
//   p->device_of_slot(slot);      // slot / (num_replicas / num_devices)
//   p->balancedness[layer];       // predicted mean/max device load, 1.0 = perfect
//
// Physical slots are numbered device-major: device d holds the slots
// [d * S, (d + 1) * S) with S = num_replicas / num_devices, and under the
// hierarchical policy node k holds the devices [k * P/K, (k + 1) * P/K).
//
// Algorithm (docs/EPLB.md has the worked version), per layer:
//   hierarchical (num_groups % num_nodes == 0):
//     1. sum the load of each group of E/G consecutive experts and pack the G
//        groups onto the K nodes, G/K groups each (BalancedPacking);
//     2. within each node, give the node's N/K physical slots to its E/K
//        experts: one each, then each further slot to the expert with the
//        highest load per replica (ReplicateExperts);
//     3. pack the node's N/K physical experts (each carrying its expert's load
//        / replica count) onto the node's P/K devices, N/P each (BalancedPacking).
//   global: the same with one group and one node, i.e. replicate over all
//     experts and pack over all devices (DeepSeek's current global path).
//
// Deterministic tie-breaking (the reference's, made explicit):
//   - BalancedPacking visits items by load descending, equal loads in
//     ascending index order (PyTorch's CPU sort is stable), and puts each item
//     in the lightest pack that still has room, the lowest-numbered pack among
//     equally light ones (Python's min() keeps the first);
//   - ReplicateExperts gives each extra slot to the expert with the highest
//     load / replica count, the lowest-numbered among equals (torch.max
//     returns the first maximum);
//   - replica r of an expert is the r-th replica created; log2phy lists an
//     expert's slots by replica rank.
// Loads are compared in double precision (the reference uses float32); the two
// can only disagree when two candidates differ by less than float32 rounding.
//
// Thread-safety: pure functions of their arguments; results are plain values.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sy::engine {

// Load matrix: load[layer][logical expert], tokens routed (or any
// non-negative, finite weight). Rows must all have the same length.
using EplbLoad = std::vector<std::vector<double>>;

enum class EplbPolicy {
  kAuto,          // hierarchical when num_groups % num_nodes == 0, else global (DeepSeek's rule)
  kHierarchical,  // keep each expert group on one node; INVALID_ARGUMENT if groups do not divide
  kGlobal,        // ignore groups and nodes; balance over all devices
};

// "auto", "hierarchical", "global".
std::string_view EplbPolicyName(EplbPolicy policy);
// Inverse of EplbPolicyName; INVALID_ARGUMENT naming the accepted values.
Result<EplbPolicy> ParseEplbPolicy(std::string_view name);

struct EplbOptions {
  // N, physical expert slots per layer. More slots than experts buy balance
  // with memory (each redundant slot holds a full copy of an expert's weights).
  // REQUIRES: N >= E and N % num_devices == 0.
  int num_replicas = 0;
  // G, expert groups (DeepSeek-V3's group-limited routing; 1 = no groups).
  // Hierarchical only: REQUIRES E % G == 0.
  int num_groups = 1;
  // K, nodes: devices on one node talk over the fast link, so the hierarchical
  // policy keeps a group's traffic inside a node. Hierarchical only:
  // REQUIRES num_devices % K == 0.
  int num_nodes = 1;
  // P, devices (GPUs or virtual devices) holding N / P slots each.
  int num_devices = 1;
  EplbPolicy policy = EplbPolicy::kAuto;
};

struct EplbPlacement {
  EplbPolicy policy = EplbPolicy::kGlobal;  // the one applied: never kAuto
  int num_devices = 1;
  // [layers][N]: logical expert held by each physical slot.
  std::vector<std::vector<int>> phy2log;
  // [layers][N]: replica rank of each slot among its expert's replicas.
  std::vector<std::vector<int>> phy_rank;
  // [layers][E][max_replicas]: the slots of each expert by replica rank,
  // padded with -1 where the expert has fewer than max_replicas() replicas.
  std::vector<std::vector<std::vector<int>>> log2phy;
  // [layers][E]: number of replicas of each expert (>= 1; a row sums to N).
  std::vector<std::vector<int>> logcnt;
  // [layers]: predicted balancedness of this placement for the input load
  // (EplbBalancedness of EplbDeviceLoads).
  std::vector<double> balancedness;

  int num_layers() const { return static_cast<int>(phy2log.size()); }
  int num_replicas() const { return phy2log.empty() ? 0 : static_cast<int>(phy2log[0].size()); }
  int num_logical() const { return logcnt.empty() ? 0 : static_cast<int>(logcnt[0].size()); }
  int slots_per_device() const { return num_replicas() / num_devices; }
  int device_of_slot(int slot) const { return slot / slots_per_device(); }
  int max_replicas() const {
    return log2phy.empty() || log2phy[0].empty() ? 0 : static_cast<int>(log2phy[0][0].size());
  }
};

// Computes the placement. INVALID_ARGUMENT, naming the parameter, when the
// matrix is empty, ragged, negative or not finite, or when the options break
// a REQUIRES above (num_replicas < experts, num_replicas % num_devices,
// num_groups % num_nodes with kHierarchical, experts % num_groups or
// num_devices % num_nodes when the hierarchical policy applies, any count < 1).
Result<EplbPlacement> RebalanceExperts(const EplbLoad& load, const EplbOptions& options);
// Same, for integer token counts (converted to double; exact below 2^53).
Result<EplbPlacement> RebalanceExperts(const std::vector<std::vector<int64_t>>& load,
                                       const EplbOptions& options);

// Per-device load of one layer: each logical expert's load split evenly over
// its replicas in `phy2log_row` (slots device-major, N / num_devices each).
// REQUIRES: num_devices >= 1 divides phy2log_row.size(); every entry of
// phy2log_row indexes load_row.
std::vector<double> EplbDeviceLoads(const std::vector<double>& load_row,
                                    const std::vector<int>& phy2log_row, int num_devices);

// mean / max of the device loads: 1.0 when perfectly even (and when all are
// zero: nothing to balance), 1 / P when one device carries everything.
// REQUIRES: device_load non-empty, entries >= 0.
double EplbBalancedness(const std::vector<double>& device_load);

// The two building blocks, one layer at a time, exposed for reuse and tests.
//
// BalancedPacking: assign n items to `num_packs` packs of exactly
// n / num_packs items each, greedily balancing pack weight (tie-breaking
// above). Returns pack[i] and rank_in_pack[i] (order of arrival in the pack).
// REQUIRES: num_packs >= 1 divides weight.size().
struct EplbPacking {
  std::vector<int> pack;
  std::vector<int> rank_in_pack;
};
EplbPacking EplbBalancedPacking(const std::vector<double>& weight, int num_packs);

// ReplicateExperts: num_phy slots for weight.size() experts; slot i < E holds
// expert i, each later slot the expert with the highest weight / count.
// REQUIRES: num_phy >= weight.size().
struct EplbReplication {
  std::vector<int> phy2log;  // [num_phy]
  std::vector<int> rank;     // [num_phy]
  std::vector<int> logcnt;   // [E]
};
EplbReplication EplbReplicateExperts(const std::vector<double>& weight, int num_phy);

}  // namespace sy::engine
