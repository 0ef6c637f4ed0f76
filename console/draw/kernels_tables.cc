// The Kernels view's lower tables (see kernels_sections.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "console/collect/kernel_trace.h"
#include "console/draw/format.h"
#include "console/draw/kernels_sections.h"
#include "console/draw/theme.h"

namespace sy::console::kernels {
namespace {

constexpr char kNoSpans[] =
    "No spans for the selected step: per-kernel timelines need ':trace full'.";

// A row of right-aligned figures after a left-aligned name: widths[i] for
// cells[i]; cells[0] is the name. The name column is as wide as the longest
// name it will hold (plus a gap), never wider than the slack: on a wide
// terminal the figures stay next to their names instead of drifting to the
// right edge.
struct Table {
  Grid& g;
  std::vector<int> widths;  // of the columns after the name
  int longest_name = 0;     // display width of the longest cells[0]
  int name_w() const {
    int fixed = 0;
    for (int w : widths) fixed += w;
    const int slack = g.width() - fixed;
    return std::max(8, std::min(slack, longest_name + 2));
  }
  void Row(int y, const std::vector<std::string>& cells, Style st,
           const std::vector<Style>& styles = {}) {
    int x = g.Put(0, y, PadRight(cells[0], name_w()), st);
    for (size_t i = 1; i < cells.size() && i - 1 < widths.size(); ++i) {
      const Style cs = i < styles.size() ? styles[i] : st;
      x = g.Put(x, y, PadLeft(cells[i], widths[i - 1]), cs);
    }
  }
};

double Share(int64_t part, int64_t all) {
  return all > 0 ? static_cast<double>(part) / static_cast<double>(all) : 0;
}

}  // namespace

int DrawTopTable(Grid& g, const Snapshot& s, int y, int end) {
  if (y >= end) return y;
  if (s.top_kernels.empty()) {
    g.Put(0, y++, "No kernel stats yet (trace level 'off'? try ':trace summary').", theme::kDimmed);
    return y;
  }
  const int steps = s.top_kernels.front().steps;
  g.Put(0, y++,
        "Top kernels, " + std::to_string(steps) + (steps == 1 ? " step" : " steps") + " to " +
            std::to_string(s.kstats_step) + "; mean/p50/p99: time per step per device",
        theme::kTitle);
  // Columns: name | kind | share | calls/step | per call | step mean | p50 | p99.
  Table t{g, {8, 7, 7, 9, 9, 9, 9}, DisplayWidth("kernel")};
  for (const KernelRow& k : s.top_kernels) {
    t.longest_name = std::max(t.longest_name, DisplayWidth(k.name));
  }
  if (y < end)
    t.Row(y++, {"kernel", "kind", "share", "calls", "per call", "mean", "p50", "p99"},
          theme::kLabel);
  for (const KernelRow& k : s.top_kernels) {
    if (y >= end) break;
    const double calls = k.steps > 0 ? static_cast<double>(k.count) / k.steps : 0;
    const Style kind_st = k.kind == "comm" ? theme::kComm : theme::kNormal;
    t.Row(y++,
          {k.name, " " + k.kind, FormatPercent(k.share), FormatCount(std::round(calls * 10) / 10),
           FormatUs(k.mean_us), FormatUs(k.step_mean_us), FormatUs(k.step_p50_us),
           FormatUs(k.step_p99_us)},
          theme::kNormal, {theme::kNormal, kind_st});
  }
  return y;
}

int DrawLayerTable(Grid& g, int64_t step, const std::vector<telemetry::Span>& spans, int y,
                   int end) {
  if (y >= end) return y;
  if (spans.empty()) {
    g.Put(0, y++, kNoSpans, theme::kDimmed);
    return y;
  }
  const std::vector<LayerKindRow> rows = LayerKindBreakdown(spans);
  int64_t all = 0;
  for (const LayerKindRow& r : rows) all += r.compute_us + r.comm_us;
  g.Put(0, y++,
        "Step " + std::to_string(step) +
            " by layer, summed over devices: compute | comm (exposed: not under compute)",
        theme::kTitle);
  // Columns: layer | compute | comm | exposed | share | top compute kernel.
  const int top_w = std::max(0, g.width() - (7 + 10 + 10 + 10 + 8 + 1));
  auto row = [&](const std::string& layer, const std::string& compute, const std::string& comm,
                 const std::string& exposed, const std::string& share, const std::string& top,
                 Style st, Style comm_st, Style exposed_st) {
    int x = g.Put(0, y, PadRight(layer, 7), st);
    x = g.Put(x, y, PadLeft(compute, 10), st);
    x = g.Put(x, y, PadLeft(comm, 10), comm_st);
    x = g.Put(x, y, PadLeft(exposed, 10), exposed_st);
    x = g.Put(x, y, PadLeft(share, 8), st);
    if (top_w > 0) g.Put(x + 1, y, PadRight(top, top_w), st);
    ++y;
  };
  if (y < end) {
    row("layer", "compute", "comm", "exposed", "share", "top compute kernel", theme::kLabel,
        theme::kLabel, theme::kLabel);
  }
  for (const LayerKindRow& r : rows) {
    if (y >= end) break;
    row(r.layer >= 0 ? "L" + std::to_string(r.layer) : "other", FormatUs(r.compute_us),
        FormatUs(r.comm_us), FormatUs(r.exposed_us),
        FormatPercent(Share(r.compute_us + r.comm_us, all)), r.top, theme::kNormal, theme::kComm,
        r.exposed_us > 0 ? theme::kWarn : theme::kDimmed);
  }
  return y;
}

int DrawKindTable(Grid& g, int64_t step, const std::vector<telemetry::Span>& spans, int y,
                  int end) {
  if (y >= end) return y;
  if (spans.empty()) {
    g.Put(0, y++, kNoSpans, theme::kDimmed);
    return y;
  }
  struct Acc {
    int calls = 0;
    int64_t us = 0;
  };
  // kind -> name -> totals; compute first.
  std::map<std::string, std::map<std::string, Acc>> by_kind;
  std::map<std::string, int64_t> kind_total;
  int64_t all = 0;
  for (const telemetry::Span& sp : spans) {
    Acc& a = by_kind[sp.kind][sp.name];
    ++a.calls;
    a.us += sp.dur_us;
    kind_total[sp.kind] += sp.dur_us;
    all += sp.dur_us;
  }
  const CommOverlap total = CommOverlapTotal(CommOverlapPerDevice(spans));
  g.Put(0, y++, "Step " + std::to_string(step) + " by kind, summed over devices", theme::kTitle);
  Table t{g, {7, 10, 8}, DisplayWidth("kind / kernel")};
  std::vector<std::string> kinds;
  for (const auto& [kind, names] : by_kind) kinds.push_back(kind);
  std::stable_partition(kinds.begin(), kinds.end(),
                        [](const std::string& k) { return k != "comm"; });
  auto head_of = [&](const std::string& kind) {
    if (kind != "comm") return kind;
    return kind + " (exposed " + FormatUs(total.exposed_us) + ", hidden " +
           FormatUs(total.hidden_us) + ")";
  };
  for (const std::string& kind : kinds) {
    t.longest_name = std::max(t.longest_name, DisplayWidth(head_of(kind)));
    for (const auto& [name, a] : by_kind[kind]) {
      t.longest_name = std::max(t.longest_name, 2 + DisplayWidth(name));
    }
  }
  if (y < end) t.Row(y++, {"kind / kernel", "calls", "time", "share"}, theme::kLabel);
  for (const std::string& kind : kinds) {
    if (y >= end) break;
    const bool comm = kind == "comm";
    const std::string head = head_of(kind);
    int calls = 0;
    for (const auto& [name, a] : by_kind[kind]) calls += a.calls;
    t.Row(y++,
          {head, std::to_string(calls), FormatUs(kind_total[kind]),
           FormatPercent(Share(kind_total[kind], all))},
          comm ? Style{Color::kMagenta, Color::kDefault, kBold} : theme::kTitle);
    std::vector<std::pair<std::string, Acc>> names(by_kind[kind].begin(), by_kind[kind].end());
    std::stable_sort(names.begin(), names.end(),
                     [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
    for (const auto& [name, a] : names) {
      if (y >= end) break;
      t.Row(y++,
            {"  " + name, std::to_string(a.calls), FormatUs(a.us), FormatPercent(Share(a.us, all))},
            comm ? theme::kComm : theme::kNormal);
    }
  }
  return y;
}

}  // namespace sy::console::kernels
