#include "engine/moe/expert_map.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace sy::engine {

namespace {

// The problems DeviceMajor and SetLayer refuse in one row, else OK.
Status CheckRow(int layer, const std::vector<int>& row, int slots, int experts) {
  const std::string where = "expert placement row of layer " + std::to_string(layer);
  if (static_cast<int>(row.size()) != slots) {
    return InvalidArgument(where + " has " + std::to_string(row.size()) + " slots, expected " +
                           std::to_string(slots) + " (rows of unequal length)");
  }
  std::vector<bool> seen(experts, false);
  for (int s = 0; s < slots; ++s) {
    if (row[s] < 0 || row[s] >= experts) {
      return InvalidArgument(where + ": slot " + std::to_string(s) + " holds expert " +
                             std::to_string(row[s]) + ", outside [0, " + std::to_string(experts) +
                             ")");
    }
    seen[row[s]] = true;
  }
  for (int e = 0; e < experts; ++e) {
    if (!seen[e]) {
      return InvalidArgument(where + ": logical expert " + std::to_string(e) +
                             " has no replica (every expert needs at least one slot)");
    }
  }
  return Status::Ok();
}

}  // namespace

ExpertMap ExpertMap::RoundRobin(int layers, int first_moe, int experts, int devices) {
  assert(layers >= 1 && experts >= 1 && devices >= 1 && first_moe >= 0 && first_moe <= layers);
  ExpertMap m;
  m.first_moe_ = first_moe;
  m.experts_ = experts;
  m.devices_ = devices;
  m.slots_ = experts;
  std::vector<int> row;
  for (int d = 0; d < devices; ++d) {
    m.device_first_slot_.push_back(static_cast<int>(row.size()));
    for (int e = d; e < experts; e += devices) {
      row.push_back(e);
      m.slot_device_.push_back(d);
    }
    m.device_slot_count_.push_back(static_cast<int>(row.size()) - m.device_first_slot_.back());
  }
  m.phy2log_.assign(layers, row);
  m.Index();
  return m;
}

Result<ExpertMap> ExpertMap::DeviceMajor(int layers, int first_moe, int experts, int devices,
                                         const std::vector<std::vector<int>>& phy2log) {
  if (layers < 1 || experts < 1 || devices < 1 || first_moe < 0 || first_moe > layers) {
    return InvalidArgument("expert placement: layers (" + std::to_string(layers) + "), experts (" +
                           std::to_string(experts) + ") and devices (" + std::to_string(devices) +
                           ") must be >= 1 and first_moe (" + std::to_string(first_moe) +
                           ") in [0, layers]");
  }
  if (phy2log.empty()) return InvalidArgument("expert placement has no rows");
  if (static_cast<int>(phy2log.size()) != layers) {
    return InvalidArgument("expert placement has " + std::to_string(phy2log.size()) +
                           " rows, expected one per model layer (" + std::to_string(layers) + ")");
  }
  // Dense layers' rows are never read: they copy the first MoE layer's row
  // (the last row when the model has no MoE layer).
  const int ref = std::min(first_moe, layers - 1);
  const int slots = static_cast<int>(phy2log[ref].size());
  if (slots % devices != 0) {
    return InvalidArgument("expert placement has " + std::to_string(slots) +
                           " physical slots per layer, not a multiple of " +
                           std::to_string(devices) + " devices");
  }
  if (slots < experts) {
    return InvalidArgument("expert placement has " + std::to_string(slots) +
                           " physical slots per layer, fewer than the " + std::to_string(experts) +
                           " logical experts");
  }
  for (int l = ref; l < layers; ++l) RETURN_IF_ERROR(CheckRow(l, phy2log[l], slots, experts));
  ExpertMap m;
  m.first_moe_ = first_moe;
  m.experts_ = experts;
  m.devices_ = devices;
  m.slots_ = slots;
  const int per = slots / devices;
  for (int d = 0; d < devices; ++d) {
    m.device_first_slot_.push_back(d * per);
    m.device_slot_count_.push_back(per);
    for (int k = 0; k < per; ++k) m.slot_device_.push_back(d);
  }
  m.phy2log_.resize(layers);
  for (int l = 0; l < layers; ++l) m.phy2log_[l] = phy2log[std::max(l, ref)];
  m.Index();
  return m;
}

bool ExpertMap::uniform() const {
  return std::all_of(device_slot_count_.begin(), device_slot_count_.end(),
                     [&](int n) { return n == device_slot_count_[0]; });
}

std::span<const int> ExpertMap::replicas(int layer, int expert) const {
  return replicas_[layer][expert];
}

int ExpertMap::Replica(int layer, int expert, int token_row, int src_rank) const {
  const std::vector<int>& r = replicas_[layer][expert];
  if (r.size() == 1) return r[0];
  return r[static_cast<size_t>(token_row + src_rank) % r.size()];
}

std::vector<int> ExpertMap::LocalExperts(int layer, int device) const {
  const auto first = phy2log_[layer].begin() + device_first_slot_[device];
  return std::vector<int>(first, first + device_slot_count_[device]);
}

std::vector<int> ExpertMap::ExpertsOnDevice(int device) const {
  std::vector<bool> on(experts_, false);
  for (int l = 0; l < layers(); ++l) {
    for (int e : LocalExperts(l, device)) on[e] = true;
  }
  std::vector<int> out;
  for (int e = 0; e < experts_; ++e) {
    if (on[e]) out.push_back(e);
  }
  return out;
}

Status ExpertMap::SetLayer(int layer, const std::vector<int>& phy2log_row) {
  if (layer < 0 || layer >= layers()) {
    return InvalidArgument("expert placement: layer " + std::to_string(layer) + " is outside [0, " +
                           std::to_string(layers()) + ")");
  }
  if (layer < first_moe_) {
    return InvalidArgument("expert placement: layer " + std::to_string(layer) +
                           " is a dense layer (MoE layers start at " + std::to_string(first_moe_) +
                           ")");
  }
  RETURN_IF_ERROR(CheckRow(layer, phy2log_row, slots_, experts_));
  phy2log_[layer] = phy2log_row;
  Index();
  return Status::Ok();
}

void ExpertMap::Index() {
  replicas_.assign(layers(), std::vector<std::vector<int>>(experts_));
  for (int l = 0; l < layers(); ++l) {
    for (int s = 0; s < slots_; ++s) replicas_[l][phy2log_[l][s]].push_back(s);
  }
}

}  // namespace sy::engine
