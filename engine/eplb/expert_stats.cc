#include "engine/eplb/expert_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"

namespace sy::engine::eplb {
namespace {

using nlohmann::json;

constexpr int kMaxWindow = 1'000'000;
// The ring holds capacity * layers * experts int32 counts; beyond this the
// caller has asked for something no engine needs (4 GiB).
constexpr size_t kMaxRingCells = size_t{1} << 30;

std::string Str(int64_t v) { return std::to_string(v); }

// mean / max over devices; 1.0 when nothing landed anywhere.
double MeanOverMax(std::span<const int64_t> device_load) {
  int64_t max = 0;
  int64_t sum = 0;
  for (int64_t v : device_load) {
    max = std::max(max, v);
    sum += v;
  }
  if (max == 0) return 1.0;
  return static_cast<double>(sum) / static_cast<double>(device_load.size()) /
         static_cast<double>(max);
}

}  // namespace

// ---------------------------------------------------------------- Placement

Result<Placement> Placement::Create(std::vector<std::vector<int>> phy2log,
                                    std::vector<std::vector<int>> phy_device, int devices) {
  if (devices < 1) return InvalidArgument("placement: devices must be >= 1, got " + Str(devices));
  if (phy2log.empty()) return InvalidArgument("placement: no layers");
  if (phy_device.size() != phy2log.size()) {
    return InvalidArgument("placement: phy2log has " + Str(phy2log.size()) +
                           " layers but phy_device " + Str(phy_device.size()));
  }
  int max_id = -1;
  for (int id : phy2log[0]) max_id = std::max(max_id, id);
  Placement p;
  p.experts_ = max_id + 1;
  p.devices_ = devices;
  if (p.experts_ < 1) return InvalidArgument("placement: layer 0 has no slots");
  p.replica_count_.assign(phy2log.size(), std::vector<int>(static_cast<size_t>(p.experts_), 0));
  p.replica_rank_.resize(phy2log.size());
  for (size_t l = 0; l < phy2log.size(); ++l) {
    const std::string where = "placement layer " + Str(l);
    if (phy_device[l].size() != phy2log[l].size()) {
      return InvalidArgument(where + ": " + Str(phy2log[l].size()) + " slots in phy2log but " +
                             Str(phy_device[l].size()) + " in phy_device");
    }
    p.replica_rank_[l].resize(phy2log[l].size());
    for (size_t s = 0; s < phy2log[l].size(); ++s) {
      const int e = phy2log[l][s];
      const int d = phy_device[l][s];
      if (e < 0 || e >= p.experts_) {
        return InvalidArgument(where + " slot " + Str(s) + ": logical expert " + Str(e) +
                               " outside [0, " + Str(p.experts_) + ")");
      }
      if (d < 0 || d >= devices) {
        return InvalidArgument(where + " slot " + Str(s) + ": device " + Str(d) + " outside [0, " +
                               Str(devices) + ")");
      }
      p.replica_rank_[l][s] = p.replica_count_[l][static_cast<size_t>(e)]++;
    }
    for (int e = 0; e < p.experts_; ++e) {
      if (p.replica_count_[l][static_cast<size_t>(e)] == 0) {
        return InvalidArgument(where + ": logical expert " + Str(e) + " has no slot");
      }
    }
  }
  p.phy2log_ = std::move(phy2log);
  p.phy_device_ = std::move(phy_device);
  return p;
}

Result<Placement> Placement::FromDeviceMajor(std::vector<std::vector<int>> phy2log, int devices) {
  if (devices < 1) return InvalidArgument("placement: devices must be >= 1, got " + Str(devices));
  std::vector<std::vector<int>> phy_device(phy2log.size());
  for (size_t l = 0; l < phy2log.size(); ++l) {
    const size_t n = phy2log[l].size();
    if (n < static_cast<size_t>(devices) || n % static_cast<size_t>(devices) != 0) {
      return InvalidArgument("placement layer " + Str(l) + ": " + Str(n) +
                             " slots do not divide evenly over " + Str(devices) + " devices");
    }
    const size_t per_device = n / static_cast<size_t>(devices);
    phy_device[l].resize(n);
    for (size_t s = 0; s < n; ++s) phy_device[l][s] = static_cast<int>(s / per_device);
  }
  return Create(std::move(phy2log), std::move(phy_device), devices);
}

Result<Placement> Placement::FromExpertDevice(const std::vector<int>& expert_device, int devices,
                                              int layers) {
  if (layers < 1) return InvalidArgument("placement: layers must be >= 1, got " + Str(layers));
  std::vector<int> ids(expert_device.size());
  for (size_t e = 0; e < ids.size(); ++e) ids[e] = static_cast<int>(e);
  return Create(std::vector<std::vector<int>>(static_cast<size_t>(layers), ids),
                std::vector<std::vector<int>>(static_cast<size_t>(layers), expert_device), devices);
}

void Placement::AddLayerLoad(int layer, std::span<const int64_t> tokens,
                             std::span<int64_t> device_load) const {
  const std::vector<int>& slots = phy2log_[static_cast<size_t>(layer)];
  const std::vector<int>& dev = phy_device_[static_cast<size_t>(layer)];
  const std::vector<int>& count = replica_count_[static_cast<size_t>(layer)];
  const std::vector<int>& rank = replica_rank_[static_cast<size_t>(layer)];
  for (size_t s = 0; s < slots.size(); ++s) {
    const size_t e = static_cast<size_t>(slots[s]);
    const int64_t t = tokens[e];
    const int64_t r = count[e];
    const int64_t share = t / r + (rank[s] < t % r ? 1 : 0);
    device_load[static_cast<size_t>(dev[s])] += share;
  }
}

// -------------------------------------------------------------- ExpertStats

Result<ExpertStats> ExpertStats::Create(int layers, int experts, std::vector<int> windows) {
  if (layers < 1) return InvalidArgument("expert stats: layers must be >= 1, got " + Str(layers));
  if (experts < 1) {
    return InvalidArgument("expert stats: experts must be >= 1, got " + Str(experts));
  }
  if (windows.empty()) return InvalidArgument("expert stats: no windows");
  for (int w : windows) {
    if (w < 1 || w > kMaxWindow) {
      return InvalidArgument("expert stats: window " + Str(w) + " outside [1, " + Str(kMaxWindow) +
                             "]");
    }
  }
  std::sort(windows.begin(), windows.end());
  windows.erase(std::unique(windows.begin(), windows.end()), windows.end());
  ExpertStats s;
  s.layers_ = layers;
  s.experts_ = experts;
  s.cells_ = static_cast<size_t>(layers) * static_cast<size_t>(experts);
  s.capacity_ = windows.back();
  const size_t cap = static_cast<size_t>(s.capacity_);
  if (s.cells_ > kMaxRingCells / cap) {
    return InvalidArgument("expert stats: " + Str(layers) + " layers x " + Str(experts) +
                           " experts x " + Str(s.capacity_) + " steps is too large a window");
  }
  s.windows_ = std::move(windows);
  s.ring_.assign(cap * s.cells_, 0);
  s.ring_step_.assign(cap, 0);
  s.ring_balance_.assign(cap * static_cast<size_t>(layers), 1.0);
  s.ring_has_balance_.assign(cap, 0);
  s.sums_.assign(s.windows_.size(), std::vector<int64_t>(s.cells_, 0));
  s.accumulated_.assign(s.cells_, 0);
  return s;
}

Status ExpertStats::CheckPlacement(const Placement& p) const {
  if (p.layers() != layers_ || p.experts() != experts_) {
    return InvalidArgument("expert stats: placement has " + Str(p.layers()) + " layers x " +
                           Str(p.experts()) + " experts, the stats " + Str(layers_) + " x " +
                           Str(experts_));
  }
  return Status::Ok();
}

Status ExpertStats::CheckWindow(int window) const {
  if (window < 0 || window > capacity_) {
    return InvalidArgument("expert stats: window " + Str(window) + " outside [1, " +
                           Str(capacity_) + "] (or 0 for all steps)");
  }
  return Status::Ok();
}

Status ExpertStats::Record(int64_t step, const LoadMatrix& counts, const Placement* placement) {
  // Validate everything first so that a refused step leaves no trace.
  if (recorded_ > 0 && step <= last_step_) {
    return InvalidArgument("expert stats: step " + Str(step) + " is not after the last recorded " +
                           Str(last_step_));
  }
  if (counts.size() != static_cast<size_t>(layers_)) {
    return InvalidArgument("expert stats: step " + Str(step) + " has " + Str(counts.size()) +
                           " layers of counts, expected " + Str(layers_));
  }
  for (size_t l = 0; l < counts.size(); ++l) {
    if (counts[l].size() != static_cast<size_t>(experts_)) {
      return InvalidArgument("expert stats: step " + Str(step) + " layer " + Str(l) + " has " +
                             Str(counts[l].size()) + " experts, expected " + Str(experts_));
    }
    for (size_t e = 0; e < counts[l].size(); ++e) {
      const int64_t v = counts[l][e];
      if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
        return InvalidArgument("expert stats: step " + Str(step) + " layer " + Str(l) + " expert " +
                               Str(e) + " has count " + Str(v));
      }
    }
  }
  if (placement != nullptr) RETURN_IF_ERROR(CheckPlacement(*placement));

  const size_t row = static_cast<size_t>(recorded_ % capacity_);
  // Drop from each window's sum the step that leaves it. For the largest
  // window that step sits in `row` itself, so this happens before overwriting.
  for (size_t w = 0; w < windows_.size(); ++w) {
    if (recorded_ < windows_[w]) continue;
    const int32_t* old = Row(static_cast<int>((recorded_ - windows_[w]) % capacity_));
    int64_t* sum = sums_[w].data();
    for (size_t c = 0; c < cells_; ++c) sum[c] -= old[c];
  }
  int32_t* dst = &ring_[row * cells_];
  for (size_t l = 0; l < counts.size(); ++l) {
    const size_t base = l * static_cast<size_t>(experts_);
    for (size_t e = 0; e < counts[l].size(); ++e) {
      dst[base + e] = static_cast<int32_t>(counts[l][e]);
      accumulated_[base + e] += counts[l][e];
    }
  }
  for (std::vector<int64_t>& sum : sums_) {
    for (size_t c = 0; c < cells_; ++c) sum[c] += dst[c];
  }
  ring_step_[row] = step;
  ring_has_balance_[row] = placement != nullptr ? 1 : 0;
  if (placement != nullptr) {
    if (scratch_device_load_.size() < static_cast<size_t>(placement->devices())) {
      scratch_device_load_.resize(static_cast<size_t>(placement->devices()));
    }
    std::span<int64_t> load(scratch_device_load_.data(), static_cast<size_t>(placement->devices()));
    for (int l = 0; l < layers_; ++l) {
      std::fill(load.begin(), load.end(), 0);
      placement->AddLayerLoad(l, counts[static_cast<size_t>(l)], load);
      ring_balance_[row * static_cast<size_t>(layers_) + static_cast<size_t>(l)] =
          MeanOverMax(load);
    }
  }
  if (recorded_ == 0) first_step_ = step;
  ++recorded_;
  last_step_ = step;
  return Status::Ok();
}

int64_t ExpertStats::WindowSteps(int window) const {
  if (window == kAll) return recorded_;
  return std::min<int64_t>(window, recorded_);
}

int ExpertStats::RowOf(int64_t i) const {
  return static_cast<int>((recorded_ - 1 - i) % capacity_);
}

Result<LoadMatrix> ExpertStats::Window(int window) const {
  RETURN_IF_ERROR(CheckWindow(window));
  LoadMatrix out(static_cast<size_t>(layers_), std::vector<int64_t>(static_cast<size_t>(experts_)));
  const auto fill = [&](const std::vector<int64_t>& flat) {
    for (size_t l = 0; l < out.size(); ++l) {
      std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(l * out[l].size()), out[l].size(),
                  out[l].begin());
    }
  };
  if (window == kAll) {
    fill(accumulated_);
    return out;
  }
  const auto it = std::find(windows_.begin(), windows_.end(), window);
  if (it != windows_.end()) {
    fill(sums_[static_cast<size_t>(it - windows_.begin())]);
    return out;
  }
  std::vector<int64_t> flat(cells_, 0);
  for (int64_t i = 0; i < WindowSteps(window); ++i) {
    const int32_t* r = Row(RowOf(i));
    for (size_t c = 0; c < cells_; ++c) flat[c] += r[c];
  }
  fill(flat);
  return out;
}

LoadMatrix ExpertStats::Accumulated() const { return std::move(Window(kAll)).value(); }

Result<std::vector<std::vector<int64_t>>> ExpertStats::DeviceLoad(int window,
                                                                  const Placement& p) const {
  RETURN_IF_ERROR(CheckPlacement(p));
  ASSIGN_OR_RETURN(LoadMatrix load, Window(window));
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(layers_),
                                        std::vector<int64_t>(static_cast<size_t>(p.devices()), 0));
  for (int l = 0; l < layers_; ++l) {
    p.AddLayerLoad(l, load[static_cast<size_t>(l)], out[static_cast<size_t>(l)]);
  }
  return out;
}

Result<Balancedness> ExpertStats::WindowBalancedness(int window, const Placement& p) const {
  ASSIGN_OR_RETURN(auto device_load, DeviceLoad(window, p));
  Balancedness b;
  b.per_layer.reserve(device_load.size());
  double total = 0;
  for (const std::vector<int64_t>& d : device_load) {
    b.per_layer.push_back(MeanOverMax(d));
    total += b.per_layer.back();
  }
  b.mean = total / static_cast<double>(b.per_layer.size());
  return b;
}

Result<Balancedness> ExpertStats::StepBalancedness(int window) const {
  RETURN_IF_ERROR(CheckWindow(window));
  const int64_t n = std::min<int64_t>(WindowSteps(window), capacity_);
  Balancedness b;
  b.per_layer.assign(static_cast<size_t>(layers_), 0.0);
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(RowOf(i));
    if (ring_has_balance_[row] == 0) continue;
    ++counted;
    for (size_t l = 0; l < b.per_layer.size(); ++l) {
      b.per_layer[l] += ring_balance_[row * static_cast<size_t>(layers_) + l];
    }
  }
  if (counted == 0) {
    return FailedPrecondition("expert stats: none of the last " + Str(n) +
                              " steps was recorded with a placement");
  }
  double total = 0;
  for (double& v : b.per_layer) {
    v /= static_cast<double>(counted);
    total += v;
  }
  b.mean = total / static_cast<double>(b.per_layer.size());
  return b;
}

Result<std::vector<HotExpert>> ExpertStats::Hottest(int window, int k) const {
  if (k < 0) return InvalidArgument("expert stats: hottest k must be >= 0, got " + Str(k));
  ASSIGN_OR_RETURN(LoadMatrix load, Window(window));
  std::vector<HotExpert> all;
  for (size_t l = 0; l < load.size(); ++l) {
    int64_t layer_total = 0;
    for (int64_t v : load[l]) layer_total += v;
    for (size_t e = 0; e < load[l].size(); ++e) {
      if (load[l][e] == 0) continue;
      all.push_back(HotExpert{static_cast<int>(l), static_cast<int>(e), load[l][e],
                              static_cast<double>(load[l][e]) / static_cast<double>(layer_total)});
    }
  }
  const auto hotter = [](const HotExpert& a, const HotExpert& b) {
    if (a.tokens != b.tokens) return a.tokens > b.tokens;
    if (a.layer != b.layer) return a.layer < b.layer;
    return a.expert < b.expert;
  };
  const size_t n = std::min(all.size(), static_cast<size_t>(k));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), hotter);
  all.resize(n);
  return all;
}

Result<std::string> ExpertStats::ToJson(int window, const Placement& p, int hottest_k) const {
  ASSIGN_OR_RETURN(LoadMatrix load, Window(window));
  ASSIGN_OR_RETURN(Balancedness bal, WindowBalancedness(window, p));
  ASSIGN_OR_RETURN(std::vector<HotExpert> hot, Hottest(window, hottest_k));
  const int64_t steps = WindowSteps(window);
  json j;
  j["load"] = load;
  j["window"] = window;
  j["window_steps"] = steps;
  j["steps_recorded"] = recorded_;
  if (steps == 0) {
    j["first_step"] = json();
  } else if (window == kAll) {
    j["first_step"] = first_step_;
  } else {
    j["first_step"] = ring_step_[static_cast<size_t>(RowOf(steps - 1))];
  }
  j["last_step"] = recorded_ > 0 ? json(last_step_) : json();
  j["layers"] = layers_;
  j["experts"] = experts_;
  j["placement"] = {
      {"phy2log", p.phy2log()}, {"phy_device", p.phy_device()}, {"devices", p.devices()}};
  j["balancedness"] = bal.per_layer;
  j["balancedness_mean"] = bal.mean;
  Result<Balancedness> step_bal = StepBalancedness(window);
  j["step_balancedness"] = step_bal.ok() ? json(step_bal->per_layer) : json();
  json hottest = json::array();
  for (const HotExpert& h : hot) {
    hottest.push_back(
        {{"layer", h.layer}, {"expert", h.expert}, {"tokens", h.tokens}, {"share", h.share}});
  }
  j["hottest"] = std::move(hottest);
  return j.dump();
}

Status ExpertStats::DumpJson(const std::string& path, int window, const Placement& p,
                             int hottest_k) const {
  ASSIGN_OR_RETURN(std::string text, ToJson(window, p, hottest_k));
  text += '\n';
  AtomicFile tmp(path, "expert stats to ");
  RETURN_IF_ERROR(tmp.Create());
  RETURN_IF_ERROR(tmp.Write(text.data(), text.size()));
  return tmp.Commit();
}

size_t ExpertStats::ReservedBytes() const {
  size_t n = ring_.capacity() * sizeof(int32_t) + ring_step_.capacity() * sizeof(int64_t) +
             ring_balance_.capacity() * sizeof(double) + ring_has_balance_.capacity() +
             accumulated_.capacity() * sizeof(int64_t) +
             scratch_device_load_.capacity() * sizeof(int64_t);
  for (const std::vector<int64_t>& s : sums_) n += s.capacity() * sizeof(int64_t);
  return n;
}

}  // namespace sy::engine::eplb
