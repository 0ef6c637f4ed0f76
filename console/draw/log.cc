// Log panel: engine events and console command results, newest at the bottom,
// one line each (cut, never wrapped), scrollable upwards. v.log_kind and
// v.log_filter (case-insensitive substring) keep a subset; scrolling counts
// the lines kept.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

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

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool LogLineMatches(const LogLine& line, LogKind kind, const std::string& filter) {
  switch (kind) {
    case LogKind::kAll:
      break;
    case LogKind::kSwitch:
      if (line.kind != "switch" && line.kind != "policy" && line.kind != "calibrate") return false;
      break;
    case LogKind::kRebalance:
      if (line.kind != "rebalance") return false;
      break;
    case LogKind::kCommand:
      if (line.level != LogLevel::kCommand && line.kind != "command") return false;
      break;
    case LogKind::kError:
      if (line.level != LogLevel::kError && line.level != LogLevel::kWarn) return false;
      break;
  }
  return filter.empty() || Lower(line.text).find(Lower(filter)) != std::string::npos;
}

Grid DrawLog(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  if (r.h <= 0) return g;
  const bool filtered = v.log_kind != LogKind::kAll || !v.log_filter.empty();
  std::vector<const LogLine*> kept;
  for (const LogLine& line : s.log) {
    if (LogLineMatches(line, v.log_kind, v.log_filter)) kept.push_back(&line);
  }
  const int n = static_cast<int>(kept.size());
  const int rows = r.h - 1;  // first row is the title
  const int max_scroll = std::max(0, n - rows);
  const int scroll = std::clamp(v.log_scroll, 0, max_scroll);
  const int end = n - scroll;
  const int begin = std::max(0, end - rows);
  std::string title = "Log: " + std::to_string(n) + " lines";
  if (filtered) title += " of " + std::to_string(s.log.size());
  if (v.log_kind != LogKind::kAll) title += ", kind " + std::string(LogKindName(v.log_kind));
  if (!v.log_filter.empty()) title += ", filter /" + v.log_filter;
  if (scroll > 0) title += ", scrolled up " + std::to_string(scroll) + " (Down/PageDown)";
  g.Put(0, 0, title, theme::kTitle);
  if (n == 0) {
    g.Put(0, 1,
          filtered ? "No line matches (k: kind, /: filter; an empty filter clears it)."
                   : "Nothing yet: engine events and command results appear here.",
          theme::kDimmed);
    return g;
  }
  // Newest at the bottom: the last line sits on the last row.
  int y = r.h - (end - begin);
  for (int i = begin; i < end; ++i, ++y) {
    const LogLine& line = *kept[i];
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
