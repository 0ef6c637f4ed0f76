// Memory panel: KV pool pages used/total per device as bars.
#include <string>

#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

// "[████░░░░]" of exactly `w` columns (w >= 2).
void Bar(Grid& g, int x, int y, int w, double fraction, Style fill) {
  if (w < 2) return;
  const int inner = w - 2;
  const int full = static_cast<int>(fraction * inner + 0.5);
  g.PutChar(x, y, U'[', theme::kDimmed);
  for (int i = 0; i < inner; ++i) {
    g.PutChar(x + 1 + i, y, i < full ? U'█' : U'░', i < full ? fill : theme::kDimmed);
  }
  g.PutChar(x + 1 + inner, y, U']', theme::kDimmed);
}

}  // namespace

Grid DrawMemory(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  int y = 0;
  const int page = s.have_meta ? s.meta.model.page_size : 0;
  g.Put(0, y++,
        "KV cache pages per device" +
            (page > 0 ? " (1 page = " + std::to_string(page) + " tokens)" : std::string()),
        theme::kTitle);
  if (s.kv.empty()) {
    g.Put(0, y, "No occupancy reported yet.", theme::kDimmed);
    return g;
  }
  // Right part: " 1234/5678  99.9%  run 123" = 27 columns.
  constexpr int kTailW = 28;
  const int bar_w = std::max(2, g.width() - 6 - kTailW);
  int64_t used = 0, total = 0;
  const int max_rows = r.h - 3;
  int shown = 0;
  for (const auto& d : s.kv) {
    used += d.kv_pages_used;
    total += d.kv_pages_total;
    if (shown >= max_rows) continue;
    const double f =
        d.kv_pages_total > 0 ? static_cast<double>(d.kv_pages_used) / d.kv_pages_total : 0.0;
    g.Put(0, y, "dev" + std::to_string(d.device), theme::kLabel);
    Bar(g, 6, y, bar_w, f, theme::ForFraction(f));
    int x = 6 + bar_w;
    x = g.Put(
        x, y,
        PadLeft(std::to_string(d.kv_pages_used) + "/" + std::to_string(d.kv_pages_total), 11));
    x = g.Put(x, y, PadLeft(FormatPercent(f), 7), theme::ForFraction(f));
    g.Put(x, y, "  run " + std::to_string(d.running));
    ++y;
    ++shown;
  }
  if (shown < static_cast<int>(s.kv.size())) {
    g.Put(0, y++, "… " + std::to_string(s.kv.size() - shown) + " more devices", theme::kDimmed);
  }
  const double f = total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0;
  ++y;
  g.Put(0, y,
        "total " + std::to_string(used) + "/" + std::to_string(total) + " pages  " +
            FormatPercent(f) + "   running " + std::to_string(s.cur_running) + "  waiting " +
            std::to_string(s.cur_waiting));
  return g;
}

}  // namespace sy::console
