// Screen composition: header, tab bar, current view, command line, status
// line, overlays. Also the View names.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "console/draw/compare.h"
#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"
#include "console/input/command_line.h"

namespace sy::console {
namespace {

constexpr const char* kTitles[kViewCount] = {"Overview", "Kernels", "Memory",
                                             "Experts",  "Log",     "Requests"};

std::string Fixed(double v, const char* fmt) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Writes segments separated by two spaces. A segment that does not fit
// whole is left out with every one after it (a header cut to "trace" with
// its level gone reads as a different state). The replay clock, the state
// and paths may be cut with "…" instead: what is left still tells them.
struct Line {
  Grid& g;
  int y;
  int x = 0;
  bool full = false;
  void Add(const std::string& text, Style st, bool may_cut = false) {
    if (full) return;
    const int sep = x > 0 ? 2 : 0;
    const int room = g.width() - x - sep;
    std::string shown = text;
    if (DisplayWidth(text) > room) {
      full = true;
      if (!may_cut || room < 4) return;
      shown = TruncateToWidth(text, room);
    }
    if (sep > 0) x = g.Put(x, y, "  ", theme::kBar);
    x = g.Put(x, y, shown, st);
  }
};

void DrawTabs(Grid& g, int y, const ViewState& v) {
  g.Fill(Rect{0, y, g.width(), 1}, U' ', theme::kBar);
  int x = 0;
  for (int i = 0; i < kViewCount; ++i) {
    const bool active = static_cast<int>(v.view) == i;
    x = g.Put(x, y, " " + std::to_string(i + 1) + " " + kTitles[i] + " ",
              active ? theme::kBarActive : theme::kBar);
  }
  // The longest hint that fits after the tabs; the command line row says
  // "press : for commands" anyway, so ":cmd" goes first at 80 columns.
  for (const char* hint : {":cmd  ?help  q quit ", "?help  q quit ", "?help "}) {
    const int hx = g.width() - DisplayWidth(hint);
    if (hx > x + 1) {
      g.Put(hx, y, hint, theme::kBar);
      break;
    }
  }
}

void DrawCommandLine(Grid& g, int y, const ViewState& v) {
  if (!v.confirm.empty()) {
    g.Put(0, y, v.confirm, theme::kWarn);
    return;
  }
  if (v.command_active) {
    const std::u32string text = DecodeUtf8(v.command_text);
    int x = g.PutChar(0, y, U':', theme::kTitle);
    const int cursor_col = x + v.command_cursor;
    x = g.Put(x, y, text, theme::kNormal);
    // The cursor is a reversed cell so it shows without a terminal cursor.
    const char32_t under =
        v.command_cursor < static_cast<int>(text.size()) ? text[v.command_cursor] : U' ';
    if (cursor_col < g.width())
      g.PutChar(cursor_col, y, under, Style{Color::kDefault, Color::kDefault, kReverse});
    if (!v.completions.empty()) {
      std::string c;
      for (const auto& s : v.completions) c += (c.empty() ? "" : " ") + s;
      g.Put(std::max(x, cursor_col + 1) + 2, y, "[" + c + "]", theme::kDimmed);
    } else if (const std::string usage = InlineUsage(v.command_text); !usage.empty()) {
      g.Put(std::max(x, cursor_col + 1) + 2, y, usage, theme::kDimmed);
    }
    return;
  }
  if (v.filter_active) {
    // The `/` filter line, drawn like the command line.
    const std::u32string text = DecodeUtf8(v.filter_text);
    int x = g.PutChar(0, y, U'/', theme::kTitle);
    const int cursor_col = x + v.filter_cursor;
    x = g.Put(x, y, text, theme::kNormal);
    const char32_t under =
        v.filter_cursor < static_cast<int>(text.size()) ? text[v.filter_cursor] : U' ';
    if (cursor_col < g.width())
      g.PutChar(cursor_col, y, under, Style{Color::kDefault, Color::kDefault, kReverse});
    g.Put(std::max(x, cursor_col + 1) + 2, y,
          "filter " + std::string(ViewTitle(v.view)) + ": Enter applies, empty clears, Esc cancels",
          theme::kDimmed);
    return;
  }
  if (!v.message.empty()) {
    g.Put(0, y, v.message, v.message_error ? theme::kBad : theme::kGood);
    return;
  }
  g.Put(0, y, "press : for commands, ? for help", theme::kDimmed);
}

}  // namespace

const char* ViewTitle(View v) { return kTitles[static_cast<int>(v)]; }

std::optional<View> ParseView(std::string_view name) {
  std::string lower;
  for (char c : name)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (int i = 0; i < kViewCount; ++i) {
    std::string t = kTitles[i];
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t == lower) return static_cast<View>(i);
  }
  return std::nullopt;
}

Grid DrawHeader(const Snapshot& s, const ViewState& v, int width) {
  Grid g(width, 1);
  g.Fill(Rect{0, 0, width, 1}, U' ', theme::kBar);
  Line line{g, 0};
  line.Add(" switchyard", Style{Color::kBlack, Color::kWhite, kBold});
  if (s.conn == ConnState::kReplay) {
    const ReplayClock& c = s.replay;
    line.Add("REPLAY " + Fixed(c.position_s, "%.1fs") + "/" + Fixed(c.duration_s, "%.1fs") + " x" +
                 Fixed(c.speed, "%g") + (c.playing ? " PLAYING" : " PAUSED"),
             Style{Color::kBlack, Color::kYellow, kBold}, /*may_cut=*/true);
  }
  std::string state = "WAITING";
  Style state_style = theme::kBar;
  if (s.conn == ConnState::kLost) {
    state = "LOST";
    state_style = Style{Color::kWhite, Color::kRed, kBold};
  } else if (s.engine_state == "stopping" || s.run_stopped) {
    state = "STOPPED";
    state_style = Style{Color::kWhite, Color::kRed, kBold};
  } else if (s.paused) {
    state = "PAUSED";
    state_style = Style{Color::kBlack, Color::kYellow, kBold};
  } else if (!s.engine_state.empty()) {
    state = "RUNNING";
    state_style = Style{Color::kBlack, Color::kGreen, kBold};
  }
  // In replay the first label is the player's; this one is the engine's at
  // that point of the run, and says so.
  if (s.conn == ConnState::kReplay) state = "engine " + state;
  line.Add(state, state_style, /*may_cut=*/true);
  if (s.have_meta) {
    line.Add(s.meta.model.preset, theme::kBar);
    line.Add(std::to_string(s.meta.devices) + " dev " + s.meta.layout, theme::kBar);
  }
  if (!s.trace_level.empty()) line.Add("trace " + s.trace_level, theme::kBar);
  if (!s.run.empty()) line.Add("run " + s.run, theme::kBar);
  (void)v;
  return g;
}

Grid DrawStatus(const Snapshot& s, const ViewState& v, int width) {
  Grid g(width, 1);
  g.Fill(Rect{0, 0, width, 1}, U' ', theme::kBar);
  Line line{g, 0};
  Style conn_style = theme::kBar;
  std::string conn = std::string(" ● ") + ConnStateName(s.conn);
  switch (s.conn) {
    case ConnState::kLive:
      conn_style = Style{Color::kBlack, Color::kGreen, kBold};
      break;
    case ConnState::kDegraded:
      conn_style = Style{Color::kBlack, Color::kYellow, kBold};
      break;
    case ConnState::kLost:
      conn_style = Style{Color::kWhite, Color::kRed, kBold};
      break;
    case ConnState::kEnded:  // the engine said so: nothing to alarm about
      conn_style = Style{Color::kBlack, Color::kWhite, kBold};
      conn += " (the engine stopped the run)";
      break;
    default:
      break;
  }
  if (s.conn == ConnState::kDegraded || s.conn == ConnState::kLost) {
    conn += " (" + Fixed(s.heartbeat_age_s, "%.1fs") + " since heartbeat)";
  }
  line.Add(conn + " ", conn_style);
  line.Add("msgs " + FormatCount(static_cast<double>(s.received)), theme::kBar);
  line.Add("gaps " + FormatCount(static_cast<double>(s.gaps)),
           s.gaps > 0 ? Style{Color::kRed, Color::kWhite, kBold} : theme::kBar);
  if (s.malformed > 0) {
    line.Add("malformed " + FormatCount(static_cast<double>(s.malformed)),
             Style{Color::kRed, Color::kWhite, kBold});
  }
  if (s.conn == ConnState::kReplay) {
    line.Add("replay " + s.db_path, theme::kBar, /*may_cut=*/true);
  } else if (s.have_store) {
    if (!s.store_error.empty()) {
      line.Add("store ERROR " + s.store_error, Style{Color::kWhite, Color::kRed, kBold},
               /*may_cut=*/true);
    } else {
      line.Add("store drops " + FormatCount(static_cast<double>(s.store_dropped)),
               s.store_dropped > 0 ? Style{Color::kRed, Color::kWhite, kBold} : theme::kBar);
    }
    line.Add("db " + s.db_path, theme::kBar, /*may_cut=*/true);
  } else {
    line.Add("not recording", theme::kBar);
  }
  (void)v;
  return g;
}

Grid DrawFrame(const Snapshot& s, const ViewState& v, int width, int height) {
  Grid g(width, height);
  if (width < kMinWidth || height < kMinHeight) {
    g.Put(0, 0, "terminal too small", theme::kBad);
    g.Put(0, 1, "need " + std::to_string(kMinWidth) + "x" + std::to_string(kMinHeight));
    g.Put(0, 2, "q quits");
    return g;
  }
  g.Blit(DrawHeader(s, v, width), 0, 0);
  DrawTabs(g, 1, v);
  const Rect body{0, 2, width, height - 4};
  Grid view(0, 0);
  switch (v.view) {
    case View::kOverview:
      view = DrawOverview(s, v, body);
      break;
    case View::kKernels:
      view = DrawKernels(s, v, body);
      break;
    case View::kMemory:
      view = DrawMemory(s, v, body);
      break;
    case View::kExperts:
      view = DrawExperts(s, v, body);
      break;
    case View::kLog:
      view = DrawLog(s, v, body);
      break;
    case View::kRequests:
      view = DrawRequests(s, v, body);
      break;
  }
  g.Blit(view, body.x, body.y);
  DrawCommandLine(g, height - 2, v);
  g.Blit(DrawStatus(s, v, width), 0, height - 1);
  if (v.debug) {
    const std::string t =
        " collect " + Fixed(v.collect_ms, "%.2f") + "ms  draw " + Fixed(v.draw_ms, "%.2f") + "ms ";
    g.Put(std::max(0, width - DisplayWidth(t)), 2, t, theme::kOverlay);
  }
  if (v.compare && v.comparison) {
    // The comparison covers the view; the message and status lines stay.
    // Centred when the terminal is larger than the panel needs, so the
    // header (which engine, which run) stays visible above it.
    const int w = std::min(width, 100);
    const int h = std::min(height - 2, CompareHeight(*v.comparison));
    const int y = std::max(0, (height - 2 - h) / 2);
    g.Blit(DrawCompare(*v.comparison, Rect{(width - w) / 2, y, w, h}), (width - w) / 2, y);
  }
  if (v.help) {
    // Help covers everything but the status line, centred when the
    // terminal is larger than it needs.
    const int w = std::min(width, 100);
    const int h = std::min(height - 1, HelpHeight(v, w, height - 1));
    const int y = std::max(0, (height - 1 - h) / 2);
    g.Blit(DrawHelp(v, Rect{(width - w) / 2, y, w, h}), (width - w) / 2, y);
  }
  return g;
}

}  // namespace sy::console
