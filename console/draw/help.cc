// Help overlay, rendered from the same tables input handling uses
// (KeyTable() and CommandTable()), so it always lists every key and command.
#include <algorithm>
#include <string>
#include <vector>

#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"
#include "console/input/command_line.h"
#include "console/input/keymap.h"

namespace sy::console {

namespace {

// The number keys that pick a view share one summary row ("1-6  views: ...")
// so the overlay fits 80x24 with every other key and command listed.
bool IsViewKey(const KeyBinding& b) {
  return b.action >= Action::kViewOverview && b.action <= Action::kViewRequests;
}

// One row of the key list: neighbouring bindings with the same help text
// share it ("Up/Down").
struct KeyRow {
  std::string keys;
  std::string_view help;
};

std::vector<KeyRow> VisibleKeys(const ViewState& v) {
  std::vector<KeyRow> rows;
  const KeyBinding* prev = nullptr;
  for (const KeyBinding& b : KeyTable()) {
    if (IsViewKey(b) || (b.scope == KeyScope::kReplay && !v.replay)) continue;
    if (prev != nullptr && prev->help == b.help && !rows.empty()) {
      rows.back().keys += "/" + std::string(b.key);
    } else {
      rows.push_back(KeyRow{std::string(b.key), b.help});
    }
    prev = &b;
  }
  return rows;
}

std::string ViewKeysRow() {
  std::string first, last, names;
  for (const KeyBinding& b : KeyTable()) {
    if (!IsViewKey(b)) continue;
    if (first.empty()) first = std::string(b.key);
    last = std::string(b.key);
    std::string name(b.help);
    if (const size_t sp = name.find(" view"); sp != std::string::npos) name.resize(sp);
    names += (names.empty() ? "" : ", ") + name;
  }
  return first + "-" + last + "      views: " + names;
}

// One row of the command list: neighbouring commands without arguments and
// with the same help text share it (":pause / :resume"), as keys do.
struct CommandRow {
  std::string usage;
  std::string_view help;
};

std::vector<CommandRow> CommandRows() {
  std::vector<CommandRow> rows;
  const CommandSpec* prev = nullptr;
  for (const CommandSpec& c : CommandTable()) {
    // :quit and :help stay commands, but the key rows already say them
    // ("q quit (:quit)", "? help (:help)"): a row saved for 80x24.
    if (c.name == "quit" || c.name == "help") continue;
    std::string usage = ":" + std::string(c.name);
    if (!c.args.empty()) usage += " " + std::string(c.args);
    if (prev != nullptr && prev->help == c.help && prev->args.empty() && c.args.empty()) {
      rows.back().usage += " / " + usage;
    } else {
      rows.push_back(CommandRow{usage, c.help});
    }
    prev = &c;
  }
  return rows;
}

// Two columns of keys when there is room for them.
int KeyColumns(int inner_w) { return inner_w >= 60 ? 2 : 1; }

// The full layout: keys in columns, one command per row with its help.
int FullHeight(const ViewState& v, int w) {
  const int columns = KeyColumns(w - 2);
  const int keys = static_cast<int>(VisibleKeys(v).size());
  const int key_rows = (keys + columns - 1) / columns;
  return 3 + key_rows + 1 + static_cast<int>(CommandRows().size());
}

// The compact layout, for when the full one does not fit (80x24 once every
// view's keys and the replay and engine commands are in): keys flow along
// the rows ("Tab next view   BackTab previous view ..."), and commands
// show only their usage, since the command line shows each one's help as
// it is typed (InlineUsage).
constexpr int kFlowSep = 3;

// Entries of `widths` packed greedily into rows of `row_w` columns:
// the index each row starts at (an entry wider than a row gets one alone).
std::vector<size_t> FlowRows(const std::vector<int>& widths, int row_w) {
  std::vector<size_t> starts;
  int x = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (starts.empty() || (x > 0 && x + kFlowSep + widths[i] > row_w)) {
      starts.push_back(i);
      x = widths[i];
    } else {
      x += (x > 0 ? kFlowSep : 0) + widths[i];
    }
  }
  return starts;
}

std::vector<int> KeyWidths(const std::vector<KeyRow>& keys) {
  std::vector<int> w;
  for (const KeyRow& k : keys) w.push_back(DisplayWidth(k.keys) + 1 + DisplayWidth(k.help));
  return w;
}

std::vector<int> CommandWidths(const std::vector<CommandRow>& rows) {
  std::vector<int> w;
  for (const CommandRow& c : rows) w.push_back(DisplayWidth(c.usage));
  return w;
}

// Text columns of a row inside the border, from x = 2 to one space before
// the right border (the same margin as on the left).
int RowWidth(int w) { return w - 4; }

int CompactHeight(const ViewState& v, int w) {
  return 3 + static_cast<int>(FlowRows(KeyWidths(VisibleKeys(v)), RowWidth(w)).size()) + 1 +
         static_cast<int>(FlowRows(CommandWidths(CommandRows()), RowWidth(w)).size());
}

void DrawCompact(Grid& g, const ViewState& v, int y, int bottom) {
  const int right = g.width() - 1;
  const std::vector<KeyRow> keys = VisibleKeys(v);
  const std::vector<size_t> key_starts = FlowRows(KeyWidths(keys), RowWidth(g.width()));
  for (size_t r = 0; r < key_starts.size() && y < bottom; ++r, ++y) {
    const size_t end = r + 1 < key_starts.size() ? key_starts[r + 1] : keys.size();
    int x = 2;
    for (size_t i = key_starts[r]; i < end; ++i) {
      if (i > key_starts[r]) x += kFlowSep;
      x = g.Put(x, y, keys[i].keys, theme::kOverlayKey, right);
      x = g.Put(x + 1, y, std::string(keys[i].help), theme::kOverlay, right);
    }
  }
  if (y < bottom) {
    g.Put(2, y++, "Commands (: then type; the line shows each one's use; Tab completes):",
          theme::kOverlayKey, right);
  }
  const std::vector<CommandRow> cmds = CommandRows();
  const std::vector<size_t> cmd_starts = FlowRows(CommandWidths(cmds), RowWidth(g.width()));
  for (size_t r = 0; r < cmd_starts.size() && y < bottom; ++r, ++y) {
    const size_t end = r + 1 < cmd_starts.size() ? cmd_starts[r + 1] : cmds.size();
    int x = 2;
    for (size_t i = cmd_starts[r]; i < end; ++i) {
      if (i > cmd_starts[r]) x += kFlowSep;
      x = g.Put(x, y, cmds[i].usage, theme::kOverlayKey, right);
    }
  }
}

}  // namespace

int HelpHeight(const ViewState& v, int w, int max_h) {
  const int full = FullHeight(v, w);
  return full <= max_h ? full : CompactHeight(v, w);
}

Grid DrawHelp(const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  if (r.w < 4 || r.h < 3) return g;
  g.Fill(Rect{0, 0, r.w, r.h}, U' ', theme::kOverlay);
  // Border with the title in the top edge.
  for (int x = 1; x < r.w - 1; ++x) {
    g.PutChar(x, 0, U'─', theme::kOverlay);
    g.PutChar(x, r.h - 1, U'─', theme::kOverlay);
  }
  for (int y = 1; y < r.h - 1; ++y) {
    g.PutChar(0, y, U'│', theme::kOverlay);
    g.PutChar(r.w - 1, y, U'│', theme::kOverlay);
  }
  g.PutChar(0, 0, U'┌', theme::kOverlay);
  g.PutChar(r.w - 1, 0, U'┐', theme::kOverlay);
  g.PutChar(0, r.h - 1, U'└', theme::kOverlay);
  g.PutChar(r.w - 1, r.h - 1, U'┘', theme::kOverlay);
  g.Put(2, 0, " Help: keys (Esc or ? closes) ", theme::kOverlayKey, r.w - 1);

  const int inner_w = r.w - 2;
  const int right = r.w - 1;
  if (FullHeight(v, r.w) > r.h) {
    g.Put(2, 1, ViewKeysRow(), theme::kOverlayKey, right);
    DrawCompact(g, v, 2, r.h - 1);
    return g;
  }
  const std::vector<KeyRow> keys = VisibleKeys(v);
  const int columns = KeyColumns(inner_w);
  const int col_w = inner_w / columns;
  const int key_rows = static_cast<int>((keys.size() + columns - 1) / columns);
  int y = 1;
  g.Put(2, y++, ViewKeysRow(), theme::kOverlayKey, right);
  for (int i = 0; i < key_rows && y < r.h - 1; ++i, ++y) {
    for (int c = 0; c < columns; ++c) {
      const size_t k = static_cast<size_t>(c * key_rows + i);
      if (k >= keys.size()) continue;
      const int x = 1 + c * col_w;
      const int clip = std::min(right, x + col_w);
      const int after = g.Put(x + 1, y, keys[k].keys, theme::kOverlayKey, clip);
      g.Put(std::max(x + 10, after + 1), y, std::string(keys[k].help), theme::kOverlay, clip);
    }
  }
  if (y < r.h - 1) {
    g.Put(2, y++,
          "Commands (press : then type; Tab completes, Up/Down history):", theme::kOverlayKey,
          right);
  }
  for (const CommandRow& c : CommandRows()) {
    if (y >= r.h - 1) break;
    // Usage in a column of 24; a longer one is shown whole and pushes its
    // help one space after it (cut to the column, it ran into the help).
    const int after = g.Put(2, y, c.usage, theme::kOverlayKey, right);
    g.Put(std::max(2 + 24, after + 1), y, std::string(c.help), theme::kOverlay, right);
    ++y;
  }
  return g;
}

}  // namespace sy::console
