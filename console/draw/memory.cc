// Memory panel: both memory pools of every device (seed 000 "Hybrid Memory
// Pools"): KV cache pages of the full-attention layers and, for a model with
// linear-attention layers, recurrent-state slots (one per running request),
// each as a bar with used/total, percent and bytes, then totals. A model
// without linear layers reports 0 slots and gets no slot rows at all. With a
// prefix cache, each device gets a third row with the radix tree's figures
// (its pages and checkpoint slots are already inside the bars above).
#include <algorithm>
#include <string>

#include "console/draw/bar.h"
#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

double Fraction(int64_t used, int64_t total) {
  return total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0;
}

// "2.50 MiB/10.0 MiB"; "" when the bytes are unknown (runs recorded before
// the engine reported them carry 0).
std::string Bytes(int64_t used, int64_t total) {
  if (total <= 0) return "";
  return FormatBytes(used) + "/" + FormatBytes(total);
}

// Columns: label (12) | bar | used/total (11) | percent (7) | bytes (20) | "  run N".
constexpr int kLabelW = 12;
constexpr int kCountW = 11;
constexpr int kPercentW = 7;
constexpr int kBytesW = 20;
constexpr int kTailW = kCountW + kPercentW + kBytesW + 8;

// One pool row; returns the x after the bytes column.
int PoolRow(Grid& g, int y, const std::string& label, int bar_w, int64_t used, int64_t total,
            int64_t bytes_used, int64_t bytes_total) {
  const double f = Fraction(used, total);
  g.Put(0, y, label, theme::kLabel);
  DrawBar(g, kLabelW, y, bar_w, f, theme::ForFraction(f));
  int x = kLabelW + bar_w;
  x = g.Put(x, y, PadLeft(std::to_string(used) + "/" + std::to_string(total), kCountW));
  x = g.Put(x, y, PadLeft(FormatPercent(f), kPercentW), theme::ForFraction(f));
  return g.Put(x, y, PadLeft(Bytes(bytes_used, bytes_total), kBytesW), theme::kDimmed);
}

// "total KV    608/1024 pages  59.4%  12.2 MiB/20.0 MiB".
std::string TotalLine(const std::string& label, int64_t used, int64_t total, const char* unit,
                      int64_t bytes_used, int64_t bytes_total) {
  std::string s = label + std::to_string(used) + "/" + std::to_string(total) + " " + unit + "  " +
                  FormatPercent(Fraction(used, total));
  const std::string b = Bytes(bytes_used, bytes_total);
  if (!b.empty()) s += "  " + b;
  return s;
}

// A device runs a prefix cache when it reports anything of one; an engine
// without one (or before it existed) reports zeros and gets no cache rows.
bool HasCache(const telemetry::DeviceOccupancy& d) {
  return d.cache_tokens > 0 || d.cache_nodes > 0 || d.cache_slots > 0 || d.cache_hit_rate > 0 ||
         d.cache_evicted_pages > 0;
}

// "34 nodes", "1 node".
std::string Counted(int64_t n, const char* noun) {
  return FormatCount(static_cast<double>(n)) + " " + noun + (n == 1 ? "" : "s");
}

// "cache  1.2k tokens  34 nodes  2 slots  hit 42.0%  evicted 120 pages".
std::string CacheLine(int64_t tokens, int64_t nodes, int64_t slots, bool hybrid, int64_t evicted) {
  std::string s = Counted(tokens, "token") + "  " + Counted(nodes, "node");
  if (hybrid) s += "  " + Counted(slots, "slot");
  return s + "  evicted " + Counted(evicted, "page");
}

}  // namespace

Grid DrawMemory(const Snapshot& s, const ViewState& /*v*/, Rect r) {
  Grid g(r.w, r.h);
  int y = 0;
  bool hybrid = false, cache = false;
  int64_t page_bytes = 0, slot_bytes = 0;
  for (const auto& d : s.kv) {
    cache = cache || HasCache(d);
    if (d.state_slots_total > 0) {
      hybrid = true;
      if (slot_bytes == 0) slot_bytes = d.state_bytes_total / d.state_slots_total;
    }
    if (page_bytes == 0 && d.kv_pages_total > 0) page_bytes = d.kv_bytes_total / d.kv_pages_total;
  }
  const int page = s.have_meta ? s.meta.model.page_size : 0;
  std::string title = "KV cache pages per device";
  if (page > 0 || page_bytes > 0) {
    title += " (1 page = ";
    if (page > 0) title += std::to_string(page) + " tokens";
    if (page > 0 && page_bytes > 0) title += ", ";
    if (page_bytes > 0) title += FormatBytes(page_bytes);
    title += ")";
  }
  if (hybrid) {
    title += "; state slots (1 per request";
    if (slot_bytes > 0) title += ", " + FormatBytes(slot_bytes);
    title += ")";
  }
  // Cut with "…" at 80 columns rather than mid-word.
  g.Put(0, y++, TruncateToWidth(title, r.w), theme::kTitle);
  if (s.kv.empty()) {
    g.Put(0, y, "No occupancy reported yet.", theme::kDimmed);
    return g;
  }

  const int bar_w = std::max(2, g.width() - kLabelW - kTailW);
  const int rows_per_device = 1 + (hybrid ? 1 : 0) + (cache ? 1 : 0);
  // Title, blank line and the total lines (KV, slots when hybrid, cache
  // when on, queue).
  const int footer = 2 + (hybrid ? 3 : 2) + (cache ? 1 : 0);
  const int max_devices = std::max(0, (r.h - 1 - footer) / rows_per_device);
  int64_t pages_used = 0, pages_total = 0, kv_bytes_used = 0, kv_bytes_total = 0;
  int64_t slots_used = 0, slots_total = 0, state_bytes_used = 0, state_bytes_total = 0;
  int64_t cache_tokens = 0, cache_nodes = 0, cache_slots = 0, cache_evicted = 0;
  int shown = 0;
  for (const auto& d : s.kv) {
    pages_used += d.kv_pages_used;
    pages_total += d.kv_pages_total;
    kv_bytes_used += d.kv_bytes_used;
    kv_bytes_total += d.kv_bytes_total;
    slots_used += d.state_slots_used;
    slots_total += d.state_slots_total;
    state_bytes_used += d.state_bytes_used;
    state_bytes_total += d.state_bytes_total;
    cache_tokens += d.cache_tokens;
    cache_nodes += d.cache_nodes;
    cache_slots += d.cache_slots;
    cache_evicted += d.cache_evicted_pages;
    if (shown >= max_devices) continue;
    const std::string dev = "dev" + std::to_string(d.device);
    const int x = PoolRow(g, y, PadRight(dev, 6) + "KV", bar_w, d.kv_pages_used, d.kv_pages_total,
                          d.kv_bytes_used, d.kv_bytes_total);
    g.Put(x, y++, "  run " + std::to_string(d.running));
    if (hybrid) {
      PoolRow(g, y++, "      slots", bar_w, d.state_slots_used, d.state_slots_total,
              d.state_bytes_used, d.state_bytes_total);
    }
    if (cache) {
      const int x = g.Put(0, y, PadRight("      cache", kLabelW), theme::kLabel);
      const int hx = g.Put(x, y, "hit " + FormatPercent(d.cache_hit_rate));
      g.Put(hx, y++,
            "  " + CacheLine(d.cache_tokens, d.cache_nodes, d.cache_slots, hybrid,
                             d.cache_evicted_pages),
            theme::kDimmed);
    }
    ++shown;
  }
  if (shown < static_cast<int>(s.kv.size())) {
    g.Put(0, y++, "… " + std::to_string(s.kv.size() - shown) + " more devices", theme::kDimmed);
  }
  ++y;
  g.Put(0, y++,
        TotalLine("total KV    ", pages_used, pages_total, "pages", kv_bytes_used, kv_bytes_total));
  if (hybrid) {
    g.Put(0, y++,
          TotalLine("total slots ", slots_used, slots_total, "slots", state_bytes_used,
                    state_bytes_total));
  }
  if (cache) {
    g.Put(
        0, y++,
        "total cache " + CacheLine(cache_tokens, cache_nodes, cache_slots, hybrid, cache_evicted));
  }
  g.Put(0, y,
        "running " + std::to_string(s.cur_running) + "  waiting " + std::to_string(s.cur_waiting));
  return g;
}

}  // namespace sy::console
