#include "console/collect/experts.h"

#include <algorithm>

namespace sy::console {
namespace {

constexpr int64_t kUsPerS = 1'000'000;

// Replicas of each logical expert in one layer's placement row.
std::vector<int> Replicas(const std::vector<int>& row, size_t experts) {
  std::vector<int> n(experts, 0);
  for (int e : row) {
    if (e >= 0 && static_cast<size_t>(e) < experts) ++n[e];
  }
  return n;
}

}  // namespace

std::vector<double> LayerBalancedness(const std::vector<std::vector<int64_t>>& counts,
                                      const std::vector<std::vector<int>>& phy2log,
                                      const std::vector<int>& slot_device) {
  std::vector<double> out;
  int devices = 0;
  for (int d : slot_device) devices = std::max(devices, d + 1);
  if (devices == 0) return out;
  const size_t layers = std::min(counts.size(), phy2log.size());
  for (size_t l = 0; l < layers; ++l) {
    const std::vector<int>& row = phy2log[l];
    const std::vector<int> replicas = Replicas(row, counts[l].size());
    std::vector<double> load(static_cast<size_t>(devices), 0.0);
    for (size_t s = 0; s < row.size() && s < slot_device.size(); ++s) {
      const int e = row[s];
      const int d = slot_device[s];
      if (e < 0 || static_cast<size_t>(e) >= counts[l].size() || d < 0) continue;
      load[static_cast<size_t>(d)] += static_cast<double>(counts[l][e]) / replicas[e];
    }
    double sum = 0, peak = 0;
    for (double x : load) {
      sum += x;
      peak = std::max(peak, x);
    }
    out.push_back(peak > 0 ? sum / devices / peak : 1.0);
  }
  return out;
}

ExpertTracker::ExpertTracker(int window_steps, int series_seconds)
    : window_steps_(window_steps), series_seconds_(series_seconds) {}

void ExpertTracker::SetMetaDevices(const std::vector<int>& expert_device) {
  if (expert_device_.empty()) expert_device_ = expert_device;
}

void ExpertTracker::Placement(size_t layers, size_t experts, std::vector<std::vector<int>>& phy2log,
                              std::vector<int>& slot_device) const {
  if (!phy2log_.empty() && !slot_device_.empty()) {
    phy2log = phy2log_;
    slot_device = slot_device_;
    return;
  }
  phy2log.clear();
  slot_device.clear();
  if (expert_device_.empty() || experts == 0) return;
  std::vector<int> identity(std::min(experts, expert_device_.size()));
  for (size_t e = 0; e < identity.size(); ++e) identity[e] = static_cast<int>(e);
  phy2log.assign(layers, identity);
  slot_device.assign(expert_device_.begin(), expert_device_.begin() + identity.size());
}

void ExpertTracker::Add(const telemetry::ExpertLoad& m) {
  if (!m.expert_device.empty()) expert_device_ = m.expert_device;
  if (!m.phy2log.empty() && !m.slot_device.empty()) {
    phy2log_ = m.phy2log;
    slot_device_ = m.slot_device;
  }
  std::vector<double> bal = m.balancedness;
  if (bal.empty()) {
    size_t experts = 0;
    for (const auto& row : m.counts) experts = std::max(experts, row.size());
    std::vector<std::vector<int>> phy2log;
    std::vector<int> slot_device;
    Placement(m.counts.size(), experts, phy2log, slot_device);
    bal = LayerBalancedness(m.counts, phy2log, slot_device);
  }
  counts_.push_back(m.counts);
  balancedness_.push_back(bal);
  while (static_cast<int>(counts_.size()) > window_steps_) {
    counts_.pop_front();
    balancedness_.pop_front();
  }
  if (bal.empty()) return;
  // Messages arrive in time order; a late one joins the newest second.
  const int64_t sec = m.env.t_us / kUsPerS;
  if (seconds_.empty() || seconds_.back().second < sec) seconds_.push_back(Second{sec, {}, {}});
  Second& b = seconds_.back();
  if (b.sum.size() < bal.size()) {
    b.sum.resize(bal.size(), 0.0);
    b.n.resize(bal.size(), 0);
  }
  for (size_t l = 0; l < bal.size(); ++l) {
    b.sum[l] += bal[l];
    ++b.n[l];
  }
  while (seconds_.back().second - seconds_.front().second >= series_seconds_) seconds_.pop_front();
}

void ExpertTracker::Fill(Snapshot& s, int devices) const {
  s.expert_device = expert_device_;
  s.expert_window_steps = static_cast<int>(counts_.size());
  for (const auto& counts : counts_) {
    if (s.expert_counts.size() < counts.size()) s.expert_counts.resize(counts.size());
    for (size_t l = 0; l < counts.size(); ++l) {
      auto& row = s.expert_counts[l];
      if (row.size() < counts[l].size()) row.resize(counts[l].size(), 0);
      for (size_t e = 0; e < counts[l].size(); ++e) row[e] += counts[l][e];
    }
  }
  size_t experts = 0;
  for (const auto& row : s.expert_counts) {
    experts = std::max(experts, row.size());
    if (s.expert_totals.size() < row.size()) s.expert_totals.resize(row.size(), 0);
    for (size_t e = 0; e < row.size(); ++e) s.expert_totals[e] += row[e];
  }

  Placement(s.expert_counts.size(), experts, s.phy2log, s.slot_device);
  s.placement_reported = !phy2log_.empty() && !slot_device_.empty();
  for (int d : s.slot_device) devices = std::max(devices, d + 1);
  for (int d : s.expert_device) devices = std::max(devices, d + 1);

  // Per slot, then per device: each expert's tokens split over its replicas.
  const size_t layers = std::min(s.expert_counts.size(), s.phy2log.size());
  s.slot_tokens.assign(layers, {});
  if (!s.expert_totals.empty()) s.device_tokens.assign(static_cast<size_t>(devices), 0);
  std::vector<double> device_load(static_cast<size_t>(devices), 0.0);
  for (size_t l = 0; l < layers; ++l) {
    const std::vector<int>& row = s.phy2log[l];
    const std::vector<int> replicas = Replicas(row, s.expert_counts[l].size());
    s.slot_tokens[l].assign(row.size(), 0.0);
    for (size_t slot = 0; slot < row.size(); ++slot) {
      const int e = row[slot];
      if (e < 0 || static_cast<size_t>(e) >= s.expert_counts[l].size()) continue;
      const double t = static_cast<double>(s.expert_counts[l][e]) / replicas[e];
      s.slot_tokens[l][slot] = t;
      const int d = slot < s.slot_device.size() ? s.slot_device[slot] : -1;
      if (d >= 0 && d < devices) device_load[static_cast<size_t>(d)] += t;
    }
  }
  for (size_t d = 0; d < s.device_tokens.size(); ++d) {
    s.device_tokens[d] = static_cast<int64_t>(device_load[d] + 0.5);
  }

  // Window mean per layer over the steps that reported the layer.
  std::vector<double> sum;
  std::vector<int> n;
  for (const auto& bal : balancedness_) {
    if (sum.size() < bal.size()) {
      sum.resize(bal.size(), 0.0);
      n.resize(bal.size(), 0);
    }
    for (size_t l = 0; l < bal.size(); ++l) {
      sum[l] += bal[l];
      ++n[l];
    }
  }
  s.balancedness.assign(sum.size(), 1.0);
  for (size_t l = 0; l < sum.size(); ++l) {
    if (n[l] > 0) s.balancedness[l] = sum[l] / n[l];
  }
  s.balancedness_trend.assign(sum.size(), {});
  for (const Second& b : seconds_) {
    for (size_t l = 0; l < b.sum.size() && l < s.balancedness_trend.size(); ++l) {
      if (b.n[l] > 0) s.balancedness_trend[l].push_back(b.sum[l] / b.n[l]);
    }
  }
}

void ExpertTracker::Reset() {
  counts_.clear();
  balancedness_.clear();
  seconds_.clear();
  expert_device_.clear();
  phy2log_.clear();
  slot_device_.clear();
}

}  // namespace sy::console
