// Kernels panel: the latest step's spans as one timeline lane per device
// (compute and comm drawn differently), and the top kernels by share of the
// step's summed kernel time.
#include <algorithm>
#include <map>
#include <string>

#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

constexpr int kLaneLabelW = 6;  // "dev0 │"

// Draws the lanes; returns the next free row.
int DrawLanes(Grid& g, const Snapshot& s, int y, int max_rows) {
  if (s.spans.empty()) {
    g.Put(0, y++, "No spans for the latest step: per-kernel timelines need ':trace full'.",
          theme::kDimmed);
    return y;
  }
  int64_t t0 = s.spans.front().start_us, t1 = t0;
  int devices = 0;
  for (const auto& sp : s.spans) {
    t0 = std::min(t0, sp.start_us);
    t1 = std::max(t1, sp.start_us + sp.dur_us);
    devices = std::max(devices, sp.device + 1);
  }
  const int64_t span_us = std::max<int64_t>(1, t1 - t0);
  int x = g.Put(0, y, "Step " + std::to_string(s.spans_step) + " timeline, " + FormatUs(span_us),
                theme::kTitle);
  x = g.Put(x, y, "   █", theme::ForKernel("attn"));
  x = g.Put(x, y, " compute  ");
  x = g.Put(x, y, "≈", theme::kComm);
  x = g.Put(x, y, " comm  ");
  x = g.Put(x, y, "▓", theme::kComm);
  g.Put(x, y++, " both");

  const int lane_w = g.width() - kLaneLabelW - 1;
  if (lane_w <= 0) return y;
  // Per cell: which kinds cover it, and the compute kernel that covers the
  // most of it (for its colour).
  struct CellUse {
    bool compute = false;
    bool comm = false;
    int64_t best = 0;
    std::string name;
  };
  const int lanes = std::min(devices, max_rows);
  for (int d = 0; d < lanes; ++d) {
    std::vector<CellUse> cells(static_cast<size_t>(lane_w));
    for (const auto& sp : s.spans) {
      if (sp.device != d) continue;
      const int64_t a = sp.start_us - t0, b = a + sp.dur_us;
      int c0 = static_cast<int>(a * lane_w / span_us);
      int c1 = static_cast<int>((b * lane_w + span_us - 1) / span_us);
      c0 = std::clamp(c0, 0, lane_w - 1);
      c1 = std::clamp(std::max(c1, c0 + 1), 1, lane_w);
      for (int c = c0; c < c1; ++c) {
        CellUse& u = cells[c];
        if (sp.kind == "comm") {
          u.comm = true;
        } else {
          u.compute = true;
          if (sp.dur_us >= u.best) {
            u.best = sp.dur_us;
            u.name = sp.name;
          }
        }
      }
    }
    g.Put(0, y, "dev" + std::to_string(d), theme::kLabel);
    g.Put(kLaneLabelW - 1, y, "│", theme::kDimmed);
    for (int c = 0; c < lane_w; ++c) {
      const CellUse& u = cells[c];
      char32_t ch = U'·';
      Style st = theme::kDimmed;
      if (u.compute && u.comm) {
        ch = U'▓';
        st = theme::kComm;
      } else if (u.comm) {
        ch = U'≈';
        st = theme::kComm;
      } else if (u.compute) {
        ch = U'█';
        st = theme::ForKernel(u.name);
      }
      g.PutChar(kLaneLabelW + c, y, ch, st);
    }
    g.Put(kLaneLabelW + lane_w, y, "│", theme::kDimmed);
    ++y;
  }
  if (lanes < devices) {
    g.Put(0, y++, "… " + std::to_string(devices - lanes) + " more devices", theme::kDimmed);
  }
  return y;
}

}  // namespace

Grid DrawKernels(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  int y = 0;
  // Leave at least 4 rows (title, header, two kernels) for the table.
  y = DrawLanes(g, s, y, std::max(1, r.h - 6));
  ++y;
  if (s.top_kernels.empty()) {
    g.Put(0, y, "No kernel stats yet (trace level 'off'? try ':trace summary').", theme::kDimmed);
    return g;
  }
  g.Put(0, y++,
        "Top kernels, step " + std::to_string(s.kstats_step) +
            ", all devices (share of summed kernel time)",
        theme::kTitle);
  // Columns: name | kind | share | count | mean | max; name takes the slack.
  const int fixed = 8 + 7 + 6 + 10 + 10;
  const int name_w = std::max(8, g.width() - fixed);
  const auto row = [&](const std::string& name, const std::string& kind, const std::string& share,
                       const std::string& count, const std::string& mean, const std::string& max,
                       Style st, Style kind_st) {
    int x = g.Put(0, y, PadRight(name, name_w), st);
    x = g.Put(x, y, PadRight(kind, 8), kind_st);
    x = g.Put(x, y, PadLeft(share, 7), st);
    x = g.Put(x, y, PadLeft(count, 6), st);
    x = g.Put(x, y, PadLeft(mean, 10), st);
    g.Put(x, y, PadLeft(max, 10), st);
    ++y;
  };
  row("kernel", "kind", "share", "count", "mean", "max", theme::kLabel, theme::kLabel);
  for (const KernelRow& k : s.top_kernels) {
    if (y >= r.h) break;
    row(k.name, k.kind, FormatPercent(k.share), std::to_string(k.count), FormatUs(k.mean_us),
        FormatUs(k.max_us), theme::kNormal, k.kind == "comm" ? theme::kComm : theme::kNormal);
  }
  return g;
}

}  // namespace sy::console
