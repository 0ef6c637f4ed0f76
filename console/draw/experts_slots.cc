// The slot map and the hottest experts of the Experts view.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "console/draw/experts_sections.h"
#include "console/draw/format.h"
#include "console/draw/theme.h"

namespace sy::console::experts {
namespace {

constexpr int kDeviceLabelW = 6;  // "dev12 "
constexpr int kDeviceLoadW = 15;  // " │ 1.2k  50.5%"
constexpr int kHottestW = 26;     // "L12 e127  12.3k  50.5% ×2 "
constexpr int kHottestMax = 6;

int Devices(const Snapshot& s) {
  int devices = 0;
  for (int d : s.slot_device) devices = std::max(devices, d + 1);
  return devices;
}

int CellWidth(const Snapshot& s) {
  int max_id = 0;
  for (const auto& row : s.phy2log) {
    for (int e : row) max_id = std::max(max_id, e);
  }
  return std::max(3, static_cast<int>(std::to_string(max_id).size()) + 1);
}

int CellsPerLine(const Snapshot& s, int w) {
  return std::max(1, (w - kDeviceLabelW - kDeviceLoadW) / CellWidth(s));
}

// Slots of each device, in slot order.
std::vector<std::vector<int>> SlotsByDevice(const Snapshot& s) {
  std::vector<std::vector<int>> out(static_cast<size_t>(Devices(s)));
  for (size_t slot = 0; slot < s.slot_device.size(); ++slot) {
    const int d = s.slot_device[slot];
    if (d >= 0) out[static_cast<size_t>(d)].push_back(static_cast<int>(slot));
  }
  return out;
}

std::vector<int> ReplicaCounts(const std::vector<int>& row) {
  std::vector<int> n;
  for (int e : row) {
    if (e < 0) continue;
    if (static_cast<size_t>(e) >= n.size()) n.resize(static_cast<size_t>(e) + 1, 0);
    ++n[static_cast<size_t>(e)];
  }
  return n;
}

}  // namespace

Style Heat(double f) {
  if (f <= 0) return theme::kDimmed;
  if (f < 0.25) return Style{Color::kBlue, Color::kDefault, 0};
  if (f < 0.5) return Style{Color::kGreen, Color::kDefault, 0};
  if (f < 0.75) return Style{Color::kYellow, Color::kDefault, 0};
  return Style{Color::kRed, Color::kDefault, kBold};
}

char32_t Shade(double f) {
  if (f <= 0) return U'·';
  if (f < 0.25) return U'░';
  if (f < 0.5) return U'▒';
  if (f < 0.75) return U'▓';
  return U'█';
}

Style ForBalance(double b) {
  return b >= 0.9 ? theme::kGood : b >= 0.7 ? theme::kWarn : theme::kBad;
}

int SlotMapLayer(const Snapshot& s, const ViewState& v) {
  const int layers = static_cast<int>(std::min(s.phy2log.size(), s.slot_tokens.size()));
  if (layers == 0 || s.slot_device.empty()) return -1;
  if (v.expert_layer >= 0) return std::min(v.expert_layer, layers - 1);
  int worst = 0;
  for (int l = 1; l < layers && l < static_cast<int>(s.balancedness.size()); ++l) {
    if (s.balancedness[l] < s.balancedness[worst]) worst = l;
  }
  return worst;
}

int SlotMapRows(const Snapshot& s, int w) {
  if (s.slot_device.empty() || s.phy2log.empty()) return 0;
  const int per_line = CellsPerLine(s, w);
  int rows = 2;  // title, summary
  for (const auto& slots : SlotsByDevice(s)) {
    rows += std::max<int>(1, (static_cast<int>(slots.size()) + per_line - 1) / per_line);
  }
  return rows;
}

int DrawSlotMap(Grid& g, int y, const Snapshot& s, const ViewState& v) {
  const int layer = SlotMapLayer(s, v);
  if (layer < 0) return y;
  const std::vector<int>& row = s.phy2log[layer];
  const std::vector<double>& tokens = s.slot_tokens[layer];
  std::string title = "Slots of L" + std::to_string(layer);
  title += v.expert_layer < 0 ? " (least balanced; [ ] pick layer)" : " ([ ] pick layer)";
  title += s.placement_reported ? ": expert in each slot, by tokens"
                                : ": one slot per expert (engine sent no placement)";
  g.Put(0, y++, title, theme::kTitle);

  double hottest = 0, layer_total = 0;
  for (double t : tokens) {
    hottest = std::max(hottest, t);
    layer_total += t;
  }
  const std::vector<int> replicas = ReplicaCounts(row);
  const int cell_w = CellWidth(s);
  const int per_line = CellsPerLine(s, g.width());
  const std::vector<std::vector<int>> by_device = SlotsByDevice(s);
  size_t widest = 0;
  for (const auto& slots : by_device) widest = std::max(widest, slots.size());
  const int load_x = kDeviceLabelW + std::min(per_line, static_cast<int>(widest)) * cell_w;
  for (size_t d = 0; d < by_device.size(); ++d) {
    const std::vector<int>& slots = by_device[d];
    g.Put(0, y, "dev" + std::to_string(d), theme::kLabel);
    double device_tokens = 0;
    for (int slot : slots) {
      if (static_cast<size_t>(slot) < tokens.size()) device_tokens += tokens[slot];
    }
    const double share = layer_total > 0 ? device_tokens / layer_total : 0.0;
    g.Put(load_x, y,
          " │" + PadLeft(FormatCount(std::round(device_tokens)), 6) +
              PadLeft(FormatPercent(share), 7),
          theme::kNormal);
    const int lines = std::max<int>(1, (static_cast<int>(slots.size()) + per_line - 1) / per_line);
    for (size_t i = 0; i < slots.size(); ++i) {
      const int slot = slots[i];
      const int x = kDeviceLabelW + static_cast<int>(i % per_line) * cell_w;
      const int line = y + static_cast<int>(i / per_line);
      const int e = static_cast<size_t>(slot) < row.size() ? row[slot] : -1;
      if (e < 0) {
        g.Put(x, line, PadLeft("-", cell_w - 1), theme::kDimmed);
        continue;
      }
      const double t = static_cast<size_t>(slot) < tokens.size() ? tokens[slot] : 0.0;
      Style st = Heat(hottest > 0 ? t / hottest : 0.0);
      if (static_cast<size_t>(e) < replicas.size() && replicas[e] > 1) st.attrs |= kUnderline;
      g.Put(x, line, PadLeft(std::to_string(e), cell_w - 1), st);
    }
    y += lines;
  }

  int experts = 0, replicated = 0;
  std::string reps;
  for (size_t e = 0; e < replicas.size(); ++e) {
    if (replicas[e] == 0) continue;
    ++experts;
    if (replicas[e] > 1) {
      ++replicated;
      reps += " e" + std::to_string(e) + "×" + std::to_string(replicas[e]);
    }
  }
  const int devices = static_cast<int>(by_device.size());
  std::string summary = std::to_string(row.size()) + " slots = " + std::to_string(experts) +
                        " experts + " + std::to_string(row.size() - experts) + " redundant";
  if (devices > 0) summary += ", " + std::to_string(row.size() / devices) + " per device";
  summary += replicated > 0 ? "; replicas:" + reps : "; no replicas in this layer";
  g.Put(0, y++, summary, theme::kDimmed);
  return y;
}

int HottestRows(const Snapshot& s, int w) {
  int pairs = 0;
  for (const auto& row : s.expert_counts) {
    for (int64_t c : row) pairs += c > 0 ? 1 : 0;
  }
  const int n = std::min(pairs, kHottestMax);
  if (n == 0) return 0;
  const int columns = std::max(1, w / kHottestW);
  return 1 + (n + columns - 1) / columns;
}

int DrawHottest(Grid& g, int y, const Snapshot& s) {
  struct Hot {
    int layer, expert;
    int64_t tokens;
  };
  std::vector<Hot> all;
  std::vector<int64_t> layer_total(s.expert_counts.size(), 0);
  for (size_t l = 0; l < s.expert_counts.size(); ++l) {
    for (size_t e = 0; e < s.expert_counts[l].size(); ++e) {
      const int64_t c = s.expert_counts[l][e];
      layer_total[l] += c;
      if (c > 0) all.push_back(Hot{static_cast<int>(l), static_cast<int>(e), c});
    }
  }
  if (all.empty()) return y;
  const size_t n = std::min(all.size(), static_cast<size_t>(kHottestMax));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const Hot& a, const Hot& b) {
                      return a.tokens != b.tokens
                                 ? a.tokens > b.tokens
                                 : std::tie(a.layer, a.expert) < std::tie(b.layer, b.expert);
                    });
  g.Put(0, y++, "Hottest experts (tokens, share of layer, replicas)", theme::kTitle);
  const int columns = std::max(1, g.width() / kHottestW);
  const int rows = static_cast<int>((n + columns - 1) / columns);
  for (size_t i = 0; i < n; ++i) {
    const Hot& h = all[i];
    // Ranked left to right, then down.
    const int x = static_cast<int>(i % columns) * kHottestW;
    const int line = y + static_cast<int>(i / columns);
    int replicas = 0;
    if (static_cast<size_t>(h.layer) < s.phy2log.size()) {
      for (int e : s.phy2log[h.layer]) replicas += e == h.expert ? 1 : 0;
    }
    const double share =
        layer_total[h.layer] > 0 ? static_cast<double>(h.tokens) / layer_total[h.layer] : 0.0;
    int cx =
        g.Put(x, line, PadRight("L" + std::to_string(h.layer) + " e" + std::to_string(h.expert), 8),
              theme::kLabel);
    cx = g.Put(cx, line, PadLeft(FormatCount(static_cast<double>(h.tokens)), 6));
    cx = g.Put(cx, line, PadLeft(FormatPercent(share), 7));
    if (replicas > 0) g.Put(cx, line, " ×" + std::to_string(replicas), theme::kDimmed);
  }
  return y + rows;
}

}  // namespace sy::console::experts
