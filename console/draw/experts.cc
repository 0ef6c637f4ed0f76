// Experts view: a title with the window's balancedness, the latest rebalance,
// then the routed-token heatmap (layers x experts) with each layer's
// balancedness and its trend, the devices x physical slots map of one layer,
// the hottest experts and the tokens per device. The sections are drawn into
// one tall grid and shown through a window that Up/Down/PageUp/PageDown
// scroll; the title row stays put.
#include <algorithm>
#include <cstdio>
#include <string>

#include "console/draw/experts_sections.h"
#include "console/draw/format.h"
#include "console/draw/sparkline.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

using experts::ForBalance;
using experts::Heat;
using experts::Shade;

constexpr int kRowLabelW = 5;  // "L12 "
constexpr int kBalW = 6;       // " 0.82 " before the trend

std::string Fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Width of the balancedness column right of the heatmap (0 without data).
int BalanceWidth(const Snapshot& s, int w) {
  if (s.balancedness.empty()) return 0;
  return std::clamp(w / 3, kBalW + 6, kBalW + 40);
}

std::string Title(const Snapshot& s) {
  std::string t = "Experts, last " + std::to_string(s.expert_window_steps) + " steps";
  if (!s.balancedness.empty()) {
    double sum = 0;
    size_t worst = 0;
    for (size_t l = 0; l < s.balancedness.size(); ++l) {
      sum += s.balancedness[l];
      if (s.balancedness[l] < s.balancedness[worst]) worst = l;
    }
    t += ": balancedness " + Fixed2(sum / static_cast<double>(s.balancedness.size())) +
         " (worst L" + std::to_string(worst) + " " + Fixed2(s.balancedness[worst]) + ")";
  }
  int64_t total = 0, peak = 0;
  for (int64_t x : s.device_tokens) {
    total += x;
    peak = std::max(peak, x);
  }
  if (total > 0) {
    const double mean = static_cast<double>(total) / static_cast<double>(s.device_tokens.size());
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", static_cast<double>(peak) / mean);
    t += ", device max/mean " + std::string(buf);
  }
  return t;
}

// The latest rebalance and the auto mode; "" when neither is known.
std::string RebalanceLine(const RebalanceStatus& r, Style& style) {
  style = theme::kNormal;
  std::string t;
  auto ms = [](double v) { return Fixed2(v) + "ms"; };
  if (r.phase == "planned") {
    t = "rebalance planned: " + std::to_string(r.experts_moved) + " experts in " +
        std::to_string(r.layers_planned) + " layers, predicted " + Fixed2(r.before) + " -> " +
        Fixed2(r.after);
  } else if (r.phase == "layer") {
    t = "rebalance running: " + std::to_string(r.layers_done) + "/" +
        std::to_string(r.layers_planned) + " layers committed";
    style = theme::kWarn;
  } else if (r.phase == "done") {
    t = "rebalanced: predicted " + Fixed2(r.before) + " -> " + Fixed2(r.after) + ", " +
        std::to_string(r.experts_moved) + " experts, pause " + ms(r.longest_pause_ms) +
        "; measuring";
    style = theme::kGood;
  } else if (r.phase == "measured") {
    t = "rebalanced: measured " + Fixed2(r.measured_before) + " -> " + Fixed2(r.measured_after) +
        ", MoE " + ms(r.moe_ms_before) + " -> " + ms(r.moe_ms_after) + "/step, " +
        std::to_string(r.experts_moved) + " experts, pause " + ms(r.longest_pause_ms);
    style = theme::kGood;
  } else if (r.phase == "failed") {
    t = "rebalance FAILED at " + r.error + (r.rolled_back ? " (rolled back)" : "");
    style = theme::kBad;
  }
  if (r.auto_known) {
    if (!t.empty()) t += "; ";
    t += r.auto_every > 0 ? "auto every " + std::to_string(r.auto_every) + " steps, gain > " +
                                Fixed2(r.auto_min_gain)
                          : std::string("auto off");
  }
  if (!r.auto_last.empty()) {
    t += t.empty() ? "auto " + r.auto_last : " (last: " + r.auto_last + ")";
  }
  return t;
}

int HeatmapRows(const Snapshot& s) { return 2 + static_cast<int>(s.expert_counts.size()); }

// Ruler and one row per layer: shaded cells, balancedness and its trend.
int DrawHeatmap(Grid& g, int y, const Snapshot& s) {
  size_t experts = 0;
  for (const auto& row : s.expert_counts) experts = std::max(experts, row.size());
  g.Put(0, y++, "Routed tokens per layer x expert (█ = hottest)", theme::kTitle);
  // Experts that do not fit one per column are grouped, `group` per column;
  // few experts get wider cells ("██ ") so the map stays readable.
  const int bal_w = BalanceWidth(s, g.width());
  const int cols_avail = std::max(1, g.width() - kRowLabelW - bal_w);
  const int group = static_cast<int>((experts + static_cast<size_t>(cols_avail) - 1) / cols_avail);
  const int cols = static_cast<int>((experts + group - 1) / group);
  const int cell_w = group == 1 ? std::clamp(cols_avail / std::max(cols, 1), 1, 3) : 1;
  const int ruler_step = cell_w > 1 ? 4 : 8;  // in cells
  // The balancedness column follows the heatmap; its trend takes the rest.
  const int bal_x = std::min(g.width() - bal_w, kRowLabelW + cols * cell_w + 1);
  const int trend_w = g.width() - bal_x - kBalW;
  for (int c = 0; c < cols; c += ruler_step) {
    g.Put(kRowLabelW + c * cell_w, y, std::to_string(c * group), theme::kDimmed, bal_x);
  }
  if (group > 1) g.Put(0, y, "x" + std::to_string(group), theme::kDimmed);
  if (bal_w > 0) g.Put(bal_x, y, " bal  trend/s", theme::kDimmed);
  ++y;

  int64_t hottest = 0;
  std::vector<std::vector<int64_t>> grouped;
  for (const auto& row : s.expert_counts) {
    std::vector<int64_t> gr(static_cast<size_t>(cols), 0);
    for (size_t e = 0; e < row.size(); ++e) gr[e / group] += row[e];
    for (int64_t c : gr) hottest = std::max(hottest, c);
    grouped.push_back(std::move(gr));
  }
  for (size_t l = 0; l < grouped.size(); ++l, ++y) {
    g.Put(0, y, "L" + std::to_string(l), theme::kLabel);
    for (int c = 0; c < cols; ++c) {
      const double f = hottest > 0 ? static_cast<double>(grouped[l][c]) / hottest : 0.0;
      for (int i = 0; i < cell_w; ++i) {
        const bool gap = cell_w == 3 && i == 2;
        g.PutChar(kRowLabelW + c * cell_w + i, y, gap ? U' ' : Shade(f), Heat(f));
      }
    }
    if (bal_w == 0 || l >= s.balancedness.size()) continue;
    const double b = s.balancedness[l];
    g.Put(bal_x + 1, y, Fixed2(b), ForBalance(b));
    if (l < s.balancedness_trend.size()) {
      g.Put(bal_x + kBalW, y, BlockSparkline(s.balancedness_trend[l], trend_w, 1.0), theme::kChart);
    }
  }
  return y;
}

// Tokens per device over all layers, through the current placement.
int DrawDeviceTotals(Grid& g, int y, const Snapshot& s) {
  int64_t total = 0, peak = 0;
  for (int64_t t : s.device_tokens) {
    total += t;
    peak = std::max(peak, t);
  }
  g.Put(0, y++, "Tokens per device, all layers", theme::kTitle);
  const int bar_w = std::max(1, g.width() - 6 - 18);
  for (size_t d = 0; d < s.device_tokens.size(); ++d, ++y) {
    const double f = peak > 0 ? static_cast<double>(s.device_tokens[d]) / peak : 0.0;
    const double share = total > 0 ? static_cast<double>(s.device_tokens[d]) / total : 0.0;
    g.Put(0, y, "dev" + std::to_string(d), theme::kLabel);
    const int full = static_cast<int>(f * bar_w + 0.5);
    for (int i = 0; i < bar_w; ++i) g.PutChar(6 + i, y, i < full ? U'█' : U' ', Heat(f));
    int x = g.Put(6 + bar_w, y, PadLeft(FormatCount(static_cast<double>(s.device_tokens[d])), 9));
    g.Put(x, y, PadLeft(FormatPercent(share), 8));
  }
  return y;
}

// Every section, top to bottom, in a grid of exactly the rows they use.
Grid Content(const Snapshot& s, const ViewState& v, int w) {
  if (s.expert_counts.empty()) {
    Grid g(w, 1);
    g.Put(0, 0, "No expert load reported yet.", theme::kDimmed);
    return g;
  }
  const int devices = static_cast<int>(s.device_tokens.size());
  const int bound = 2 + HeatmapRows(s) + 1 + experts::SlotMapRows(s, w) + 1 +
                    experts::HottestRows(s, w) + 1 + 1 + devices;
  Grid g(w, bound);
  int y = 0;
  g.Put(0, y++, Title(s), theme::kTitle);
  Style st;
  const std::string rebalance = RebalanceLine(s.rebalance, st);
  if (!rebalance.empty()) g.Put(0, y++, rebalance, st);
  y = DrawHeatmap(g, y, s);
  if (experts::SlotMapLayer(s, v) >= 0) y = experts::DrawSlotMap(g, y + 1, s, v);
  if (experts::HottestRows(s, w) > 0) y = experts::DrawHottest(g, y + 1, s);
  if (devices > 0) y = DrawDeviceTotals(g, y + 1, s);
  Grid out(w, y);
  out.Blit(g, 0, 0);
  return out;
}

// Rows of content shown below the pinned title when it overflows `h` (the
// last row then says where the window is).
int MaxScroll(int content_rows, int h) {
  if (content_rows <= h || h < 3) return 0;
  return std::max(0, (content_rows - 1) - (h - 2));
}

}  // namespace

int ExpertsMaxScroll(const Snapshot& s, const ViewState& v, int width, int height) {
  const int h = height - 4;  // the body of DrawFrame
  if (width <= 0 || h <= 0) return 0;
  return MaxScroll(Content(s, v, width).height(), h);
}

Grid DrawExperts(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  if (r.w <= 0 || r.h <= 0) return g;
  const Grid c = Content(s, v, r.w);
  if (c.height() <= r.h || r.h < 3) {
    g.Blit(c, 0, 0);
    return g;
  }
  // Title pinned; rows 1.. scrolled; the last row is the position.
  const int scroll = std::clamp(v.experts_scroll, 0, MaxScroll(c.height(), r.h));
  const int shown = r.h - 2;
  Grid title(r.w, 1);
  title.Blit(c, 0, 0);
  g.Blit(title, 0, 0);
  Grid body(r.w, shown);
  body.Blit(c, 0, -(1 + scroll));
  g.Blit(body, 0, 1);
  const int first = 2 + scroll;  // 1-based rows of the content shown
  const int last = 1 + scroll + shown;
  g.Put(0, r.h - 1,
        "── rows " + std::to_string(first) + "-" + std::to_string(last) + " of " +
            std::to_string(c.height()) + (last < c.height() ? ", Down/PageDown for more" : "") +
            (scroll > 0 ? ", Up/PageUp back" : "") + " ──",
        theme::kDimmed);
  return g;
}

}  // namespace sy::console
