// File: engine/moe/expert_map.h
//
// ExpertMap: where every routed expert's weights live, per MoE layer, as data
// the EP MoE layer reads each step (SGLang's ExpertLocationMetadata). Each
// layer has N >= E physical slots; slot s holds one logical expert
// (phy2log) on one device (slot_device); a logical expert may have several
// replicas (redundant experts, seed 004 "Expert Parallelism Load Balancer").
// Slots are numbered so that each device's slots form one contiguous run in
// ascending device order ("device-major"); a device's local slot k is its
// k-th slot. Changing a placement is replacing a layer's row: no code path
// changes (EPLB, engine/eplb).
//
//   // 4 layers (layer 0 dense), 16 experts, 4 devices:
//   ExpertMap m = ExpertMap::RoundRobin(4, 1, 16, 4);
//   m.slot_device(5);        // 1: device 1 holds slots 4..7
//   m.phy2log(1, 5);         // 5: device d holds experts d, d+P, ...
//   m.Replica(1, 5, 0, 2);   // 5: expert 5's one slot (row 0 of rank 2)
//
// Layers are model layers (0..layers-1, the index of StepOutput::expert_counts);
// rows of dense layers (< first_moe) exist and are never read by dispatch.
//
// Replica choice (dispatch): the j-th row routed to logical expert e by
// source rank r in one layer's dispatch goes to e's replica (j + r) mod
// replicas(e), replicas ordered by ascending slot. Deterministic, even to
// within one row per source, and spread over replicas even when every source
// sends one row (decode).
//
// Thread-safety: immutable value; the runner replaces a layer's row only
// between steps (SetLayer), never while a device reads it.
#pragma once

#include <span>
#include <vector>

#include "base/status.h"

namespace sy::engine {

class ExpertMap {
 public:
  // R = 0: device d owns experts {e : e % P == d}, ascending, in its slots
  // (today's layout). Works for any P (devices may own unequal counts).
  // REQUIRES: layers >= 1, experts >= 1, devices >= 1.
  static ExpertMap RoundRobin(int layers, int first_moe, int experts, int devices);

  // Every layer (>= first_moe; dense rows copy layer first_moe's) from
  // phy2log rows with slots_per_device = N / P on each device.
  // INVALID_ARGUMENT naming the problem: no rows, a row count other than
  // layers, N % devices != 0, rows of unequal length, an id outside
  // [0, experts), or a logical expert without a replica in some layer.
  static Result<ExpertMap> DeviceMajor(int layers, int first_moe, int experts, int devices,
                                       const std::vector<std::vector<int>>& phy2log);

  int layers() const { return static_cast<int>(phy2log_.size()); }
  int first_moe() const { return first_moe_; }
  int experts() const { return experts_; }
  int devices() const { return devices_; }
  // N, physical slots per layer (the same in every layer).
  int slots() const { return slots_; }
  // Slots of `device` (the same in every layer), and the first of them.
  int device_slots(int device) const { return device_slot_count_[device]; }
  int device_first_slot(int device) const { return device_first_slot_[device]; }
  // True when every device holds the same number of slots.
  bool uniform() const;

  int phy2log(int layer, int slot) const { return phy2log_[layer][slot]; }
  const std::vector<int>& phy2log_row(int layer) const { return phy2log_[layer]; }
  int slot_device(int slot) const { return slot_device_[slot]; }
  const std::vector<int>& slot_device_row() const { return slot_device_; }
  // Slots holding `expert` in `layer`, ascending (at least one).
  std::span<const int> replicas(int layer, int expert) const;
  // The slot row j of source rank src_rank routed to `expert` goes to (see above).
  int Replica(int layer, int expert, int token_row, int src_rank) const;
  // Logical experts in `device`'s slots of `layer`, in local slot order.
  std::vector<int> LocalExperts(int layer, int device) const;
  // Logical experts present on `device` in any layer, ascending (what a
  // weight builder or loader must materialise there).
  std::vector<int> ExpertsOnDevice(int device) const;

  // Replaces one layer's row (same N, same device runs). INVALID_ARGUMENT as
  // DeviceMajor for a bad row or layer index; the map is unchanged then.
  Status SetLayer(int layer, const std::vector<int>& phy2log_row);

  bool operator==(const ExpertMap& o) const = default;

 private:
  ExpertMap() = default;
  void Index();  // rebuilds replicas_ from phy2log_

  int first_moe_ = 0;
  int experts_ = 0;
  int devices_ = 0;
  int slots_ = 0;
  std::vector<std::vector<int>> phy2log_;                // [layer][slot]
  std::vector<int> slot_device_;                         // [slot]
  std::vector<int> device_first_slot_;                   // [device]
  std::vector<int> device_slot_count_;                   // [device]
  std::vector<std::vector<std::vector<int>>> replicas_;  // [layer][expert] -> slots
};

}  // namespace sy::engine
