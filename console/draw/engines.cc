// Several engines on one screen: the strip, the per-engine table, and the
// frame that picks per view between the merged snapshot and one band per
// engine (engines.h).

#include "console/draw/engines.h"

#include <algorithm>

#include "console/collect/merge.h"
#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

Style ConnStyle(ConnState c) {
  switch (c) {
    case ConnState::kLive:
      return Style{Color::kBlack, Color::kGreen, kBold};
    case ConnState::kDegraded:
      return Style{Color::kBlack, Color::kYellow, kBold};
    case ConnState::kLost:
      return Style{Color::kWhite, Color::kRed, kBold};
    default:
      return theme::kBar;
  }
}

std::string Fit(std::string s, int w, bool right) {
  if (static_cast<int>(s.size()) > w) s = s.substr(0, std::max(0, w - 1)) + "…";
  return right ? PadLeft(s, w) : s + std::string(std::max(0, w - DisplayWidth(s)), ' ');
}

// The engine's own view for the bands.
Grid DrawOne(const Snapshot& s, const ViewState& v, Rect r) {
  switch (v.view) {
    case View::kOverview:
      return DrawOverview(s, v, r);
    case View::kKernels:
      return DrawKernels(s, v, r);
    case View::kMemory:
      return DrawMemory(s, v, r);
    case View::kExperts:
      return DrawExperts(s, v, r);
    case View::kLog:
      return DrawLog(s, v, r);
    case View::kRequests:
      return DrawRequests(s, v, r);
  }
  return Grid(r.w, r.h);
}

Grid DrawBands(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
               const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  const int n = static_cast<int>(engines.size());
  const int band = n > 0 ? r.h / n : 0;
  if (band < 3) {
    g.Put(0, 0, "too many engines to show side by side here: pick one with e or :engine N",
          theme::kWarn);
    return g;
  }
  for (int i = 0; i < n; ++i) {
    const int y = i * band;
    const int h = i + 1 == n ? r.h - y : band;
    g.Fill(Rect{0, y, r.w, 1}, U' ', theme::kBarActive);
    g.Put(0, y,
          " engine " + std::to_string(i + 1) + "  " + names[i] + "  " +
              ConnStateName(engines[i].conn) +
              (engines[i].run.empty() ? "" : "  run " + engines[i].run) + " ",
          theme::kBarActive);
    g.Blit(DrawOne(engines[i], v, Rect{0, 0, r.w, h - 1}), 0, y + 1);
  }
  return g;
}

}  // namespace

Grid DrawEngineStrip(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
                     const ViewState& v, int width) {
  Grid g(width, 1);
  g.Fill(Rect{0, 0, width, 1}, U' ', theme::kBar);
  int x = g.Put(0, 0, " engines ", Style{Color::kBlack, Color::kWhite, kBold});
  const bool all = v.engine < 0 || v.engine >= static_cast<int>(engines.size());
  x = g.Put(x, 0, " all ", all ? theme::kBarActive : theme::kBar);
  for (size_t i = 0; i < engines.size(); ++i) {
    const bool sel = !all && v.engine == static_cast<int>(i);
    x = g.Put(x, 0, " ", theme::kBar);
    x = g.Put(x, 0, std::to_string(i + 1) + " " + names[i] + " ",
              sel ? theme::kBarActive : theme::kBar);
    x = g.Put(x, 0, std::string(ConnStateName(engines[i].conn)), ConnStyle(engines[i].conn));
  }
  const std::string hint = " e/E engine ";
  if (width - DisplayWidth(hint) > x + 1) g.Put(width - DisplayWidth(hint), 0, hint, theme::kBar);
  return g;
}

Grid DrawEngineTable(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
                     Rect r) {
  Grid g(r.w, r.h);
  constexpr int kNum = 10, kState = 9;
  const auto layout_of = [](const Snapshot& s) {
    return s.have_meta ? std::to_string(s.meta.devices) + " dev " + s.meta.layout
                       : std::string("-");
  };
  // Name, run and layout columns as wide as their longest entry (at most
  // 22, 14 and 12); name and run narrowed (with an ellipsis) when the
  // figures would not fit the width.
  int name_w = DisplayWidth("engine"), run_w = DisplayWidth("run");
  int layout_w = DisplayWidth("layout");
  for (size_t i = 0; i < engines.size(); ++i) {
    name_w = std::max(name_w, DisplayWidth(names[i]));
    run_w = std::max(run_w, DisplayWidth(engines[i].run));
    layout_w = std::max(layout_w, DisplayWidth(layout_of(engines[i])));
  }
  name_w = std::min(name_w + 1, 22);
  run_w = std::min(run_w + 1, 14);
  layout_w = std::min(layout_w + 1, 12);
  const int spare = r.w - (4 + 1 + kState + 1 + layout_w + 2 * kNum + 2 * (kNum - 2));
  while (name_w + run_w > spare && (name_w > 7 || run_w > 7)) {
    if (name_w >= run_w && name_w > 7) {
      --name_w;
    } else {
      --run_w;
    }
  }
  const auto row = [&](int y, const std::string& num, const std::string& name,
                       const std::string& state, const std::string& run, const std::string& layout,
                       double prefill, double decode, int running, int waiting, Style st) {
    std::string line =
        Fit(num, 4, false) + Fit(name, name_w, false) + " " + Fit(state, kState, false) +
        Fit(run, run_w, false) + " " + Fit(layout, layout_w, false) +
        Fit(FormatRate(prefill), kNum, true) + Fit(FormatRate(decode), kNum, true) +
        Fit(FormatCount(running), kNum - 2, true) + Fit(FormatCount(waiting), kNum - 2, true);
    g.Put(0, y, line, st);
  };
  g.Put(0, 0,
        Fit("#", 4, false) + Fit("engine", name_w, false) + " " + Fit("state", kState, false) +
            Fit("run", run_w, false) + " " + Fit("layout", layout_w, false) +
            Fit("prefill", kNum, true) + Fit("decode", kNum, true) +
            Fit("running", kNum - 2, true) + Fit("waiting", kNum - 2, true),
        theme::kTitle);
  int y = 1;
  for (size_t i = 0; i < engines.size() && y < r.h; ++i, ++y) {
    const Snapshot& s = engines[i];
    row(y, std::to_string(i + 1), names[i], ConnStateName(s.conn), s.run.empty() ? "-" : s.run,
        layout_of(s), s.cur_prefill_tps, s.cur_decode_tps, s.cur_running, s.cur_waiting,
        s.conn == ConnState::kLost ? theme::kBad : theme::kNormal);
  }
  if (y < r.h) {
    const Snapshot m = MergeSnapshots(engines);
    row(y, "", "sum", "", "", m.have_meta ? std::to_string(m.meta.devices) + " dev" : "-",
        m.cur_prefill_tps, m.cur_decode_tps, m.cur_running, m.cur_waiting, theme::kLabel);
  }
  return g;
}

Grid DrawEngineFrame(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
                     const ViewState& v, int width, int height) {
  const int n = static_cast<int>(engines.size());
  if (n <= 1) return DrawFrame(n == 1 ? engines[0] : Snapshot{}, v, width, height);
  const bool all = v.engine < 0 || v.engine >= n;
  const Snapshot merged = all ? MergeSnapshots(engines) : Snapshot{};
  const Snapshot& shown = all ? merged : engines[v.engine];
  if (width < kMinWidth || height - 1 < kMinHeight) return DrawFrame(shown, v, width, height);
  Grid g(width, height);
  g.Blit(DrawEngineStrip(engines, names, v, width), 0, 0);
  g.Blit(DrawFrame(shown, v, width, height - 1), 0, 1);
  if (!all || v.help) return g;
  // DrawFrame's body: below its header and tab bar, above its command and
  // status lines.
  const Rect body{0, 3, width, height - 1 - 4};
  Grid view(0, 0);
  switch (v.view) {
    case View::kOverview: {
      const int table = std::min(n + 2, body.h / 2);
      view = Grid(body.w, body.h);
      view.Blit(DrawEngineTable(engines, names, Rect{0, 0, body.w, table}), 0, 0);
      view.Blit(DrawOverview(merged, v, Rect{0, 0, body.w, body.h - table - 1}), 0, table + 1);
      break;
    }
    case View::kKernels:
    case View::kExperts:
    case View::kLog:
      view = DrawBands(engines, names, v, body);
      break;
    case View::kMemory:
    case View::kRequests:
      return g;  // the merged snapshot's own view, as DrawFrame drew it
  }
  g.Blit(view, body.x, body.y);
  return g;
}

}  // namespace sy::console
