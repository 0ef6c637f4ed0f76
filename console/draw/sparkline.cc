#include "console/draw/sparkline.h"

#include <algorithm>
#include <cmath>

namespace sy::console {
namespace {

double Clean(double v) { return std::isfinite(v) && v > 0 ? v : 0.0; }

double ScaleMax(std::span<const double> values, double max) {
  if (max > 0) return max;
  double m = 0;
  for (double v : values) m = std::max(m, Clean(v));
  return m;
}

}  // namespace

std::u32string BlockSparkline(std::span<const double> values, int width, double max) {
  static constexpr char32_t kLevels[] = U" ▁▂▃▄▅▆▇█";
  if (width <= 0) return U"";
  std::u32string out(static_cast<size_t>(width), U' ');
  const size_t n = std::min(values.size(), static_cast<size_t>(width));
  const auto recent = values.subspan(values.size() - n);
  const double m = ScaleMax(recent, max);
  for (size_t i = 0; i < n; ++i) {
    const double v = Clean(recent[i]);
    int level = 0;
    if (v > 0 && m > 0) level = std::clamp(static_cast<int>(std::ceil(v / m * 8)), 1, 8);
    out[width - n + i] = kLevels[level];
  }
  return out;
}

std::vector<std::u32string> BrailleChart(std::span<const double> values, int width, int rows,
                                         double max) {
  if (width <= 0 || rows <= 0) return {};
  std::vector<std::u32string> out(static_cast<size_t>(rows),
                                  std::u32string(static_cast<size_t>(width), U'\u2800'));
  const size_t cap = static_cast<size_t>(width) * 2;
  const size_t n = std::min(values.size(), cap);
  const auto recent = values.subspan(values.size() - n);
  const double m = ScaleMax(recent, max);
  const int dots = rows * 4;
  // Dot bits of a braille cell by (column 0/1, row from the bottom 0..3).
  static constexpr int kBits[2][4] = {{0x40, 0x04, 0x02, 0x01}, {0x80, 0x20, 0x10, 0x08}};
  for (size_t i = 0; i < n; ++i) {
    const double v = Clean(recent[i]);
    int h = 0;
    if (v > 0 && m > 0) h = std::clamp(static_cast<int>(std::lround(v / m * dots)), 1, dots);
    // Right-align: sample slot counted from the right edge.
    const size_t slot = cap - n + i;
    const size_t col = slot / 2;
    const int half = static_cast<int>(slot % 2);
    for (int d = 0; d < h; ++d) {
      const int row = rows - 1 - d / 4;
      out[row][col] = static_cast<char32_t>(out[row][col] | kBits[half][d % 4]);
    }
  }
  return out;
}

}  // namespace sy::console
