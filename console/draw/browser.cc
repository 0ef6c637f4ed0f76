#include "console/draw/browser.h"

#include <algorithm>
#include <cctype>

#include "console/draw/format.h"
#include "console/draw/theme.h"

namespace sy::console {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct Column {
  const char* head;
  int width;
  bool right;
};

// RUN takes what the others leave.
constexpr Column kColumns[] = {
    {"STARTED", 16, false}, {"DURATION", 8, true}, {"MODEL", 12, false}, {"DEVS", 4, true},
    {"LAYOUTS", 8, false},  {"SW", 4, true},       {"REBAL", 5, true},   {"STEPS", 7, true},
    {"SPANS", 7, true},     {"END", 11, false},
};

std::string ColumnText(const std::string& s, const Column& c) {
  return c.right ? PadLeft(s, c.width) : PadRight(s, c.width);
}

std::vector<std::string> Cells(const BrowserRow& r) {
  return {r.started,
          r.duration,
          r.model.empty() ? "-" : r.model,
          std::to_string(r.devices),
          r.layouts,
          std::to_string(r.switches),
          std::to_string(r.rebalances),
          FormatCount(static_cast<double>(r.steps)),
          FormatCount(static_cast<double>(r.spans)),
          r.status};
}

}  // namespace

std::vector<int> BrowserVisible(const BrowserState& s) {
  std::vector<int> out;
  const std::string f = Lower(s.filter);
  for (int i = 0; i < static_cast<int>(s.rows.size()); ++i) {
    const BrowserRow& r = s.rows[i];
    if (f.empty() || Lower(r.id + " " + r.model + " " + r.layouts + " " + r.status).find(f) !=
                         std::string::npos) {
      out.push_back(i);
    }
  }
  return out;
}

Grid DrawBrowser(const BrowserState& s, int width, int height) {
  Grid g(width, height);
  if (width <= 0 || height <= 0) return g;
  const std::vector<int> visible = BrowserVisible(s);
  std::string title = " Runs in " + s.path + " (" + FormatBytes(s.file_bytes) + ", " +
                      std::to_string(s.rows.size()) + " run" + (s.rows.size() == 1 ? "" : "s");
  if (!s.filter.empty()) title += ", " + std::to_string(visible.size()) + " shown";
  title += ")";
  g.Fill(Rect{0, 0, width, 1}, U' ', theme::kBar);
  g.Put(0, 0, title, theme::kBar);

  // RUN gets what the columns leave, at least kRunMin: narrow terminals drop
  // the least telling columns first.
  constexpr int kRunMin = 16;
  constexpr size_t kDropOrder[] = {7, 9, 0, 2};  // STEPS, END, STARTED, MODEL
  std::vector<bool> shown(std::size(kColumns), true);
  auto fixed_width = [&] {
    int w = 0;
    for (size_t c = 0; c < std::size(kColumns); ++c)
      if (shown[c]) w += kColumns[c].width + 1;
    return w;
  };
  for (size_t d : kDropOrder) {
    if (fixed_width() + 1 + kRunMin <= width) break;
    shown[d] = false;
  }
  const int run_w = std::max(kRunMin, width - fixed_width() - 1);
  auto format_row = [&](const std::string& id, const std::vector<std::string>& cells) {
    std::string line = " " + PadRight(id, run_w);
    for (size_t c = 0; c < cells.size(); ++c)
      if (shown[c]) line += " " + ColumnText(cells[c], kColumns[c]);
    return line;
  };
  std::vector<std::string> heads;
  for (const Column& c : kColumns) heads.emplace_back(c.head);
  if (height > 1) g.Put(0, 1, format_row("RUN", heads), theme::kLabel);

  const int list_top = 2;
  const int list_h = std::max(0, height - 3);
  const int n = static_cast<int>(visible.size());
  const int sel = n == 0 ? -1 : std::clamp(s.selected, 0, n - 1);
  const int first = sel < list_h ? 0 : sel - list_h + 1;
  for (int i = 0; i < list_h && first + i < n; ++i) {
    const BrowserRow& r = s.rows[visible[first + i]];
    const std::string line = format_row(r.id, Cells(r));
    const bool is_sel = first + i == sel;
    const int y = list_top + i;
    g.Put(0, y, line, is_sel ? Style{Color::kDefault, Color::kDefault, kReverse} : theme::kNormal);
    if (is_sel) g.Restyle(0, y, width, Style{Color::kDefault, Color::kDefault, kReverse});
  }
  if (list_h > 0 && n == 0) {
    g.Put(1, list_top, s.rows.empty() ? "(no runs stored yet)" : "(no run matches the filter)",
          theme::kDimmed);
  }

  if (height >= 3) {
    const int y = height - 1;
    if (s.filtering) {
      g.Put(0, y, "/" + s.filter, theme::kNormal);
      g.Put(1 + DisplayWidth(s.filter), y, "_", theme::kDimmed);
    } else if (!s.message.empty()) {
      g.Put(0, y, s.message, theme::kBad);
    } else {
      std::string hint = "Up/Down select  Enter replay  / filter  q quit";
      if (!s.filter.empty()) hint = "filter '" + s.filter + "'  Esc clears  " + hint;
      g.Put(0, y, hint, theme::kDimmed);
    }
  }
  return g;
}

}  // namespace sy::console
