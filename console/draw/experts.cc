// Experts panel: routed-token heatmap (layers x experts) over the collector's
// window of steps, then per-device totals through the expert -> device map.
#include <algorithm>
#include <cstdio>
#include <string>

#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

constexpr int kRowLabelW = 5;  // "L12 "

Style Heat(double f) {
  if (f <= 0) return theme::kDimmed;
  if (f < 0.25) return Style{Color::kBlue, Color::kDefault, 0};
  if (f < 0.5) return Style{Color::kGreen, Color::kDefault, 0};
  if (f < 0.75) return Style{Color::kYellow, Color::kDefault, 0};
  return Style{Color::kRed, Color::kDefault, kBold};
}

char32_t Shade(double f) {
  if (f <= 0) return U'·';
  if (f < 0.25) return U'░';
  if (f < 0.5) return U'▒';
  if (f < 0.75) return U'▓';
  return U'█';
}

}  // namespace

Grid DrawExperts(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  int y = 0;
  if (s.expert_counts.empty()) {
    g.Put(0, y, "No expert load reported yet.", theme::kDimmed);
    return g;
  }
  size_t experts = 0;
  for (const auto& row : s.expert_counts) experts = std::max(experts, row.size());
  g.Put(0, y++,
        "Routed tokens per layer x expert, last " + std::to_string(s.expert_window_steps) +
            " steps (█ = hottest)",
        theme::kTitle);
  // Experts that do not fit one per column are grouped, `group` per column;
  // few experts get wider cells ("██ ") so the map stays readable.
  const int cols_avail = std::max(1, g.width() - kRowLabelW);
  const int group = static_cast<int>((experts + static_cast<size_t>(cols_avail) - 1) / cols_avail);
  const int cols = static_cast<int>((experts + group - 1) / group);
  const int cell_w = group == 1 ? std::clamp(cols_avail / std::max(cols, 1), 1, 3) : 1;
  const int ruler_step = cell_w > 1 ? 4 : 8;  // in cells
  for (int c = 0; c < cols; c += ruler_step) {
    g.Put(kRowLabelW + c * cell_w, y, std::to_string(c * group), theme::kDimmed);
  }
  if (group > 1) g.Put(0, y, "x" + std::to_string(group), theme::kDimmed);
  ++y;

  int64_t hottest = 0;
  std::vector<std::vector<int64_t>> grouped;
  for (const auto& row : s.expert_counts) {
    std::vector<int64_t> gr(static_cast<size_t>(cols), 0);
    for (size_t e = 0; e < row.size(); ++e) gr[e / group] += row[e];
    for (int64_t c : gr) hottest = std::max(hottest, c);
    grouped.push_back(std::move(gr));
  }
  const int device_rows = static_cast<int>(s.device_tokens.size());
  // Keep room for the device section (title + rows + blank) when possible.
  const int layer_rows =
      std::max(1, std::min<int>(static_cast<int>(grouped.size()), r.h - y - device_rows - 3));
  for (int l = 0; l < layer_rows && l < static_cast<int>(grouped.size()); ++l) {
    g.Put(0, y, "L" + std::to_string(l), theme::kLabel);
    for (int c = 0; c < cols; ++c) {
      const double f = hottest > 0 ? static_cast<double>(grouped[l][c]) / hottest : 0.0;
      for (int i = 0; i < cell_w; ++i) {
        const bool gap = cell_w == 3 && i == 2;
        g.PutChar(kRowLabelW + c * cell_w + i, y, gap ? U' ' : Shade(f), Heat(f));
      }
    }
    ++y;
  }
  if (layer_rows < static_cast<int>(grouped.size())) {
    g.Put(0, y++, "… " + std::to_string(grouped.size() - layer_rows) + " more layers",
          theme::kDimmed);
  }
  ++y;
  if (s.device_tokens.empty()) return g;

  int64_t total = 0, peak = 0;
  for (int64_t t : s.device_tokens) {
    total += t;
    peak = std::max(peak, t);
  }
  const double mean = static_cast<double>(total) / static_cast<double>(s.device_tokens.size());
  const double imbalance = mean > 0 ? static_cast<double>(peak) / mean : 0.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2fx", imbalance);
  g.Put(0, y++, "Tokens per device (max/mean " + std::string(buf) + ")", theme::kTitle);
  const int bar_w = std::max(1, g.width() - 6 - 18);
  for (size_t d = 0; d < s.device_tokens.size() && y < r.h; ++d) {
    const double f = peak > 0 ? static_cast<double>(s.device_tokens[d]) / peak : 0.0;
    const double share = total > 0 ? static_cast<double>(s.device_tokens[d]) / total : 0.0;
    g.Put(0, y, "dev" + std::to_string(d), theme::kLabel);
    const int full = static_cast<int>(f * bar_w + 0.5);
    for (int i = 0; i < bar_w; ++i) {
      g.PutChar(6 + i, y, i < full ? U'█' : U' ', Heat(f));
    }
    int x = g.Put(6 + bar_w, y, PadLeft(FormatCount(static_cast<double>(s.device_tokens[d])), 9));
    g.Put(x, y, PadLeft(FormatPercent(share), 8));
    ++y;
  }
  return g;
}

}  // namespace sy::console
