// Log panel: engine events and console command results, newest at the bottom,
// one line each (cut, never wrapped), scrollable upwards.
#include <algorithm>
#include <cstdio>
#include <string>

#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

Style ForLevel(LogLevel l) {
  switch (l) {
    case LogLevel::kInfo:
      return theme::kNormal;
    case LogLevel::kWarn:
      return theme::kWarn;
    case LogLevel::kError:
      return theme::kBad;
    case LogLevel::kCommand:
      return theme::kLabel;
  }
  return theme::kNormal;
}

}  // namespace

Grid DrawLog(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  if (r.h <= 0) return g;
  const int n = static_cast<int>(s.log.size());
  const int rows = r.h - 1;  // first row is the title
  const int max_scroll = std::max(0, n - rows);
  const int scroll = std::clamp(v.log_scroll, 0, max_scroll);
  const int end = n - scroll;
  const int begin = std::max(0, end - rows);
  std::string title = "Log: " + std::to_string(n) + " lines";
  if (scroll > 0) title += ", scrolled up " + std::to_string(scroll) + " (Down/PageDown)";
  g.Put(0, 0, title, theme::kTitle);
  if (n == 0) {
    g.Put(0, 1, "Nothing yet: engine events and command results appear here.", theme::kDimmed);
    return g;
  }
  // Newest at the bottom: the last line sits on the last row.
  int y = r.h - (end - begin);
  for (int i = begin; i < end; ++i, ++y) {
    const LogLine& line = s.log[i];
    char t[32];
    if (line.t_us >= 0) {
      std::snprintf(t, sizeof t, "%8.1fs ", static_cast<double>(line.t_us) / 1e6);
    } else {
      std::snprintf(t, sizeof t, "%9s ", "console");
    }
    const int x = g.Put(0, y, t, theme::kDimmed);
    g.Put(x, y, TruncateToWidth(line.text, r.w - x), ForLevel(line.level));
  }
  return g;
}

}  // namespace sy::console
