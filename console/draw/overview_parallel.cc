// The Overview's TP <-> EP rows: layout timeline, policy gauge, switches,
// decision, calibration curves (overview_sections.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "console/draw/bar.h"
#include "console/draw/format.h"
#include "console/draw/overview_sections.h"
#include "console/draw/theme.h"

namespace sy::console::overview {
namespace {

constexpr Style kEpStyle{Color::kCyan, Color::kDefault, 0};
constexpr Style kTpStyle{Color::kBlue, Color::kDefault, kBold};

std::string Fixed(double v, const char* fmt = "%.1f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "24" for a whole number, "19.2" otherwise.
std::string Short(double v) { return Fixed(std::round(v * 10) / 10, "%g"); }

int64_t SecondOf(int64_t t_us) { return t_us >= 0 ? t_us / 1'000'000 : -1; }

std::string TimeAt(int64_t t_us) { return Fixed(static_cast<double>(t_us) / 1e6) + "s"; }

}  // namespace

int DrawLayoutStrip(Grid& g, int y, const Snapshot& s, int label_w, int value_w) {
  const ParallelStatus& p = s.parallel;
  if (p.layout.empty()) return y + 1;
  g.Put(0, y, "layout", theme::kLabel);
  g.Put(label_w, y, PadLeft(p.layout, value_w - 1),
        p.layout == "TP" ? kTpStyle : Style{Color::kCyan, Color::kDefault, kBold});
  const int chart_x = label_w + value_w;
  const int w = g.width() - chart_x;
  const int n = static_cast<int>(s.batch.size());
  if (w <= 0 || n == 0) return y + 1;
  // Layout before the first completed switch in view: that switch's
  // source; with none, the layout in force now.
  const int64_t first_sec = s.series_end_s - std::min(n, w) + 1;
  std::string layout = p.layout;
  for (const SwitchMark& m : p.switches) {
    if (m.phase != "done" || m.from.empty()) continue;
    if (SecondOf(m.t_us) >= first_sec) {
      layout = m.from;
      break;
    }
    layout = m.to;  // a switch before the window sets the layout it starts with
  }
  size_t next = 0;
  for (int c = w - std::min(n, w); c < w; ++c) {
    const int64_t sec = s.series_end_s - (w - 1 - c);
    char32_t ch = layout == "TP" ? U'━' : U'─';
    Style st = layout == "TP" ? kTpStyle : kEpStyle;
    bool failed_here = false;
    for (; next < p.switches.size() && SecondOf(p.switches[next].t_us) <= sec; ++next) {
      const SwitchMark& m = p.switches[next];
      if (SecondOf(m.t_us) < sec) {
        if (m.phase == "done" && !m.to.empty()) layout = m.to;
        continue;
      }
      if (m.phase == "done") {
        if (!m.to.empty()) layout = m.to;
        if (!failed_here) {
          ch = layout == "TP" ? U'T' : U'E';
          st = layout == "TP" ? kTpStyle : Style{Color::kCyan, Color::kDefault, kBold};
        }
      } else if (m.phase == "failed") {
        ch = U'✗';
        st = theme::kBad;
        failed_here = true;  // a failure in a second outranks what else happened
      } else if (!failed_here) {
        ch = U'!';
        st = theme::kWarn;
      }
    }
    g.PutChar(chart_x + c, y, ch, st);
  }
  return y + 1;
}

int DrawSwitchRows(Grid& g, int y, const Snapshot& s, int label_w) {
  const ParallelStatus& p = s.parallel;
  const int w = g.width();
  if (p.policy.known) {
    const SwitchPolicy& pol = p.policy;
    g.Put(0, y, "Policy", theme::kLabel);
    int x = g.Put(label_w, y, PadRight(pol.mode.empty() ? "?" : pol.mode, 7),
                  pol.mode == "auto" ? theme::kGood : theme::kTitle);
    const int batch = s.cur_running;
    const double scale = std::max({1.5 * pol.t_high, static_cast<double>(batch), 1.0});
    const int gauge_w = std::clamp(w - x - 38, 0, 30);
    if (gauge_w >= 8 && pol.t_high > 0) {
      const int inner = gauge_w - 2;
      DrawBar(g, x, y, gauge_w, batch / scale, theme::kChart);
      // Threshold marks over the bar: the cell where the value starts.
      const auto mark = [&](double v, char32_t ch, Style st) {
        const int cell = std::clamp(static_cast<int>(v / scale * inner), 0, inner - 1);
        g.PutChar(x + 1 + cell, y, ch, st);
      };
      mark(pol.t_low, U'┆', theme::kWarn);
      mark(pol.t_high, U'┃', theme::kBad);
      x += gauge_w + 1;
    }
    x = g.Put(x, y, "batch " + std::to_string(batch), theme::kTitle);
    x = g.Put(x, y, "  T_l┆" + Short(pol.t_low) + (pol.t_low_auto ? "a" : ""), theme::kWarn);
    x = g.Put(x, y, "  T_h┃" + std::to_string(pol.t_high), theme::kBad);
    // The tuning figures, in this order, each while the row has room.
    std::vector<std::string> tail = {"  W " + std::to_string(pol.window),
                                     "  C " + std::to_string(pol.cooldown)};
    if (pol.queue > 0) tail.push_back("  Q " + std::to_string(pol.queue));
    if (pol.rollout == "on") tail.push_back("  rollout");
    for (const std::string& t : tail) {
      if (x + DisplayWidth(t) > w) break;
      x = g.Put(x, y, t, theme::kDimmed);
    }
    ++y;
  }
  if (!p.switches.empty() || p.switches_done + p.switches_failed + p.switches_refused > 0) {
    g.Put(0, y, "Switches", theme::kLabel);
    std::string text = std::to_string(p.switches_done) + " done";
    if (p.switches_failed > 0) text += ", " + std::to_string(p.switches_failed) + " failed";
    if (p.switches_refused > 0) text += ", " + std::to_string(p.switches_refused) + " refused";
    int x = g.Put(label_w, y, text);
    if (!p.switches.empty()) {
      const SwitchMark& m = p.switches.back();
      std::string last = "; last " + m.from + "->" + m.to + " ";
      Style st = theme::kNormal;
      if (m.phase == "done") {
        last += Fixed(m.total_ms) + " ms";
      } else if (m.phase == "failed") {
        last += m.rolled_back ? "FAILED, rolled back" : "FAILED";
        st = theme::kBad;
      } else {
        last += "refused";
        st = theme::kWarn;
      }
      last += " at " + TimeAt(m.t_us);
      if (!m.why.empty()) last += " (" + m.why + ")";
      g.Put(x, y, last, st);
    }
    ++y;
  }
  if (p.decision.t_us >= 0) {
    g.Put(0, y, "Decision", theme::kLabel);
    const PolicyDecision& d = p.decision;
    std::string text = d.step >= 0 ? "step " + std::to_string(d.step) + ": " : "";
    text += d.message.empty() ? d.why : d.message;
    g.Put(label_w, y, text,
          d.action == "none" || d.action.empty() ? theme::kNormal : theme::kTitle);
    ++y;
  }
  const CalibrationStatus& c = p.calibration;
  if (!c.phase.empty()) {
    g.Put(0, y, "Calib", theme::kLabel);
    std::string text;
    Style st = theme::kNormal;
    if (c.phase == "started") {
      text = "measuring TP and EP since " + TimeAt(c.t_us) + "…";
      st = theme::kDimmed;
    } else if (c.phase == "failed") {
      text = "failed: " + c.error;
      st = theme::kBad;
    } else if (c.has_crossover) {
      text = "crossover batch " + Short(c.crossover_batch) + ": T_h " + std::to_string(c.t_high) +
             ", T_l " + Short(c.t_low) + (c.applied ? " applied" : " not applied") + ", " +
             std::to_string(c.points.size()) + " points";
    } else {
      text = "no crossover (" + c.kind + "), " + std::to_string(c.points.size()) + " points";
      st = theme::kWarn;
    }
    g.Put(label_w, y, text, st);
    ++y;
  }
  return y;
}

int DrawCalibrationCurves(Grid& g, int y, const Snapshot& s) {
  const CalibrationStatus& c = s.parallel.calibration;
  if (c.phase != "done" || c.points.empty()) return y;
  double max_ms = 0;
  for (const CalibrationPoint& pt : c.points) max_ms = std::max({max_ms, pt.tp_ms, pt.ep_ms});
  g.Put(0, y++,
        "Calibration at " + TimeAt(c.t_us) + ": decode step latency by batch, 0 to " +
            Fixed(max_ms, "%.2f") + " ms",
        theme::kTitle);
  // "  batch  TP  12.345ms [bar]  EP  12.345ms [bar]"
  constexpr int kBatchW = 7;
  constexpr int kValueW = 14;  // "  TP  12.345ms "
  const int bar_w = std::max(0, (g.width() - kBatchW - 2 * kValueW - 1) / 2);
  bool crossover_drawn = false;
  for (const CalibrationPoint& pt : c.points) {
    if (c.has_crossover && !crossover_drawn && pt.batch > c.crossover_batch) {
      g.Put(0, y++,
            PadLeft(Short(c.crossover_batch), kBatchW) + "  ── crossover: EP faster above (T_h " +
                std::to_string(c.t_high) + ", T_l " + Short(c.t_low) + ")",
            theme::kWarn);
      crossover_drawn = true;
    }
    int x = g.Put(0, y, PadLeft(std::to_string(pt.batch), kBatchW), theme::kLabel);
    const bool tp_faster = pt.tp_ms <= pt.ep_ms;
    const auto curve = [&](const char* name, double ms, bool faster, Style st) {
      x = g.Put(x, y, std::string("  ") + name, faster ? theme::kTitle : theme::kNormal);
      x = g.Put(x, y, PadLeft(Fixed(ms, "%.3f") + "ms", kValueW - 5));
      x = g.Put(x, y, " ");
      if (bar_w >= 3) {
        DrawBar(g, x, y, bar_w, max_ms > 0 ? ms / max_ms : 0,
                faster ? Style{st.fg, st.bg, kBold} : theme::kDimmed);
        x += bar_w;
      }
    };
    curve("TP", pt.tp_ms, tp_faster, kTpStyle);
    curve("EP", pt.ep_ms, !tp_faster, kEpStyle);
    ++y;
  }
  return y;
}

}  // namespace sy::console::overview
