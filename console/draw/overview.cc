// Overview panel: throughput and queue sparklines with the layout timeline
// under them, latency percentiles, the run's model and layout, the switch
// policy with its batch gauge, and the calibration curves when there is room.
#include <algorithm>
#include <string>

#include "console/draw/format.h"
#include "console/draw/overview_sections.h"
#include "console/draw/sparkline.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

constexpr int kLabelW = 9;   // "prefill  "
constexpr int kValueW = 10;  // "  12.3k/s "

// Label and value on the first row, then a chart of `rows` rows after them.
void SeriesRows(Grid& g, int y, const char* label, const std::string& value,
                const std::vector<double>& series, int rows, Style chart_style) {
  g.Put(0, y, label, theme::kLabel);
  g.Put(kLabelW, y, PadLeft(value, kValueW - 1), theme::kTitle);
  const int chart_x = kLabelW + kValueW;
  const int chart_w = g.width() - chart_x;
  if (chart_w <= 0) return;
  if (rows == 1) {
    g.Put(chart_x, y, BlockSparkline(series, chart_w), chart_style);
    return;
  }
  const auto chart = BrailleChart(series, chart_w, rows);
  for (int i = 0; i < rows; ++i) g.Put(chart_x, y + i, chart[i], chart_style);
}

// " (6 kda + 2 mla)" for a model that mixes attention kinds, "" otherwise.
std::string LayerMix(const telemetry::ModelInfo& m) {
  std::string mix;
  int kinds = 0;
  for (std::string_view kind : telemetry::kAttentionKinds) {
    const auto n = std::count(m.attention.begin(), m.attention.end(), kind);
    if (n == 0) continue;
    mix += (kinds++ > 0 ? " + " : "") + std::to_string(n) + " " + std::string(kind);
  }
  return kinds > 1 ? " (" + mix + ")" : "";
}

}  // namespace

Grid DrawOverview(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  int y = 0;
  const int secs = static_cast<int>(s.decode_tps.size());
  g.Put(0, y++,
        secs > 0 ? "Throughput, last " + std::to_string(secs) + "s (engine time)"
                 : std::string("Throughput (engine time): no steps yet"),
        theme::kTitle);
  SeriesRows(g, y, "prefill", FormatRate(s.cur_prefill_tps), s.prefill_tps, 2, theme::kChart);
  y += 2;
  SeriesRows(g, y, "decode", FormatRate(s.cur_decode_tps), s.decode_tps, 2, theme::kChart);
  y += 2;
  SeriesRows(g, y++, "batch", FormatCount(s.cur_batch), s.batch, 1, theme::kLabel);
  SeriesRows(g, y++, "running", FormatCount(s.cur_running), s.running, 1, theme::kLabel);
  SeriesRows(g, y++, "waiting", FormatCount(s.cur_waiting), s.waiting, 1,
             s.cur_waiting > 0 ? theme::kWarn : theme::kLabel);
  // On the axis of the three rows above: one column per second.
  y = overview::DrawLayoutStrip(g, y, s, kLabelW, kValueW);

  g.Put(0, y++, "Latency, last " + std::to_string(s.ttft.count) + " requests", theme::kTitle);
  const auto latency = [&](const char* name, const Percentiles& p) {
    int x = g.Put(0, y, name, theme::kLabel);
    x = g.Put(kLabelW, y, "p50 ");
    x = g.Put(x, y, PadLeft(p.count ? FormatUs(p.p50_us) : "-", 9), theme::kTitle);
    x = g.Put(x, y, "   p99 ");
    g.Put(x, y, PadLeft(p.count ? FormatUs(p.p99_us) : "-", 9), theme::kTitle);
    ++y;
  };
  latency("TTFT", s.ttft);
  latency("TPOT", s.tpot);
  g.Put(0, y++,
        "finished " + FormatCount(static_cast<double>(s.finished_total)) + "   generated " +
            FormatCount(static_cast<double>(s.generated_total)) + "   step " +
            std::to_string(s.latest_step < 0 ? 0 : s.latest_step));
  ++y;

  if (!s.have_meta) {
    g.Put(0, y, "waiting for the engine's meta message…", theme::kDimmed);
    return g;
  }
  const telemetry::ModelInfo& m = s.meta.model;
  int x = g.Put(0, y, "Model", theme::kLabel);
  // Cut with "…" (at 80 columns a hybrid's dtype does not fit), not mid-word.
  g.Put(std::max(x, kLabelW), y++,
        TruncateToWidth(m.preset + "  " + FormatCount(static_cast<double>(m.params)) + " params  " +
                            std::to_string(m.layers) + " layers" + LayerMix(m) + "  " +
                            std::to_string(m.experts) + " experts top-" + std::to_string(m.top_k) +
                            "  " + m.dtype,
                        g.width() - std::max(x, kLabelW)));
  x = g.Put(0, y, "Layout", theme::kLabel);
  std::string layout = s.meta.layout + " on " + std::to_string(s.meta.devices) + " devices  KV " +
                       std::to_string(s.meta.kv_pages_per_device) + " pages/device x " +
                       std::to_string(m.page_size) + " tokens";
  if (s.meta.state_slots_per_device > 0) {
    layout += "  state " + std::to_string(s.meta.state_slots_per_device) + " slots/device";
  }
  g.Put(std::max(x, kLabelW), y++, layout);
  if (!s.meta.workload.empty()) {
    x = g.Put(0, y, "Workload", theme::kLabel);
    g.Put(std::max(x, kLabelW), y++, s.meta.workload);
  }
  y = overview::DrawSwitchRows(g, y, s, kLabelW);
  // The curves need a row per point and one for the crossover; at 80x24
  // there is no room and the Calib row with the Log's table tell it.
  const CalibrationStatus& c = s.parallel.calibration;
  const int curve_rows = 2 + static_cast<int>(c.points.size()) + (c.has_crossover ? 1 : 0);
  if (c.phase == "done" && g.height() - y >= curve_rows) {
    overview::DrawCalibrationCurves(g, y + 1, s);
  }
  (void)v;
  return g;
}

}  // namespace sy::console
