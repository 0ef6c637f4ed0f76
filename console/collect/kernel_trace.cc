#include "console/collect/kernel_trace.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "console/collect/collector.h"

namespace sy::console {
namespace {

using Interval = std::pair<int64_t, int64_t>;  // [start, end)

// Sorted, disjoint union of `v`.
std::vector<Interval> Merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

int64_t Length(const std::vector<Interval>& merged) {
  int64_t n = 0;
  for (const Interval& i : merged) n += i.second - i.first;
  return n;
}

// Time [a, b) shares with the sorted disjoint `merged`.
int64_t Overlap(int64_t a, int64_t b, const std::vector<Interval>& merged) {
  int64_t n = 0;
  auto it =
      std::lower_bound(merged.begin(), merged.end(), Interval{a, a},
                       [](const Interval& x, const Interval& y) { return x.second < y.first; });
  if (it != merged.begin()) --it;
  for (; it != merged.end() && it->first < b; ++it) {
    n += std::max<int64_t>(0, std::min(b, it->second) - std::max(a, it->first));
  }
  return n;
}

int64_t Overlap(const std::vector<Interval>& a, const std::vector<Interval>& merged) {
  int64_t n = 0;
  for (const Interval& i : a) n += Overlap(i.first, i.second, merged);
  return n;
}

// Per device: the merged compute and comm intervals.
struct DeviceIntervals {
  std::vector<Interval> compute;
  std::vector<Interval> comm;
};

std::map<int, DeviceIntervals> ByDevice(const std::vector<telemetry::Span>& spans) {
  std::map<int, DeviceIntervals> d;
  for (const telemetry::Span& s : spans) {
    auto& dev = d[s.device];
    (s.kind == "comm" ? dev.comm : dev.compute).push_back({s.start_us, s.start_us + s.dur_us});
  }
  for (auto& [device, di] : d) {
    di.compute = Merge(std::move(di.compute));
    di.comm = Merge(std::move(di.comm));
  }
  return d;
}

}  // namespace

std::vector<KernelRow> KernelWindowRows(const std::deque<telemetry::KernelStats>& steps) {
  struct Acc {
    KernelRow row;
    std::vector<int64_t> per_step;  // indexed like `steps`
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;
  int64_t all = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    std::set<int> devices;
    for (const auto& k : steps[i].kernels) devices.insert(k.device);
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(devices.size()));
    std::map<std::pair<std::string, std::string>, int64_t> step_total;
    for (const auto& k : steps[i].kernels) {
      Acc& a = acc[{k.name, k.kind}];
      a.row.name = k.name;
      a.row.kind = k.kind;
      a.row.count += k.count;
      a.row.total_us += k.total_us;
      a.row.max_us = std::max(a.row.max_us, k.max_us);
      all += k.total_us;
      step_total[{k.name, k.kind}] += k.total_us;
    }
    for (const auto& [key, total] : step_total) {
      Acc& a = acc[key];
      a.per_step.resize(steps.size(), 0);
      a.per_step[i] = total / n;
    }
  }
  std::vector<KernelRow> rows;
  for (auto& [key, a] : acc) {
    KernelRow& r = a.row;
    a.per_step.resize(steps.size(), 0);
    r.mean_us = r.count > 0 ? r.total_us / r.count : 0;
    r.share = all > 0 ? static_cast<double>(r.total_us) / static_cast<double>(all) : 0;
    r.steps = static_cast<int>(steps.size());
    int64_t sum = 0;
    for (int64_t v : a.per_step) sum += v;
    r.step_mean_us = r.steps > 0 ? sum / r.steps : 0;
    r.step_p50_us = Percentile(a.per_step, 50);
    r.step_p99_us = Percentile(a.per_step, 99);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelRow& a, const KernelRow& b) { return a.total_us > b.total_us; });
  return rows;
}

std::vector<CommOverlap> CommOverlapPerDevice(const std::vector<telemetry::Span>& spans) {
  std::vector<CommOverlap> out;
  for (const auto& [device, di] : ByDevice(spans)) {
    CommOverlap o;
    o.device = device;
    o.compute_us = Length(di.compute);
    o.comm_us = Length(di.comm);
    o.hidden_us = Overlap(di.comm, di.compute);
    o.exposed_us = o.comm_us - o.hidden_us;
    o.busy_us = o.compute_us + o.comm_us - o.hidden_us;
    out.push_back(o);
  }
  return out;
}

CommOverlap CommOverlapTotal(const std::vector<CommOverlap>& per_device) {
  CommOverlap t;
  t.device = -1;
  for (const CommOverlap& o : per_device) {
    t.compute_us += o.compute_us;
    t.comm_us += o.comm_us;
    t.hidden_us += o.hidden_us;
    t.exposed_us += o.exposed_us;
    t.busy_us += o.busy_us;
  }
  return t;
}

std::vector<LayerKindRow> LayerKindBreakdown(const std::vector<telemetry::Span>& spans) {
  const std::map<int, DeviceIntervals> dev = ByDevice(spans);
  std::map<int, LayerKindRow> rows;
  std::map<int, std::map<std::string, int64_t>> compute_by_name;
  for (const telemetry::Span& s : spans) {
    const int layer = s.layer < 0 ? -1 : s.layer;
    LayerKindRow& r = rows[layer];
    r.layer = layer;
    ++r.kernels;
    if (s.kind == "comm") {
      r.comm_us += s.dur_us;
      r.exposed_us +=
          s.dur_us - Overlap(s.start_us, s.start_us + s.dur_us, dev.at(s.device).compute);
    } else {
      r.compute_us += s.dur_us;
      compute_by_name[layer][s.name] += s.dur_us;
    }
  }
  std::vector<LayerKindRow> out;
  for (auto& [layer, r] : rows) {
    int64_t best = -1;
    for (const auto& [name, us] : compute_by_name[layer]) {
      if (us > best) {
        best = us;
        r.top = name;
      }
    }
    out.push_back(std::move(r));
  }
  // std::map puts -1 first; the layer stack reads better before it.
  std::stable_partition(out.begin(), out.end(), [](const LayerKindRow& r) { return r.layer >= 0; });
  return out;
}

}  // namespace sy::console
