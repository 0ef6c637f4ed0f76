#include "console/draw/format.h"

#include <cmath>
#include <cstdio>

#include "console/draw/grid.h"

namespace sy::console {

std::string FormatUs(int64_t us) {
  char buf[32];
  if (us < 1000) {
    std::snprintf(buf, sizeof buf, "%lldus", static_cast<long long>(us));
  } else if (us < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.2fms", us / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fs", us / 1e6);
  }
  return buf;
}

std::string FormatCount(double v) {
  char buf[32];
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  if (a < 1000) {
    if (v == std::floor(v)) {
      std::snprintf(buf, sizeof buf, "%.0f", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.1f", v);
    }
  } else if (a < 1e6) {
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  } else if (a < 1e9) {
    std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fG", v / 1e9);
  }
  return buf;
}

std::string FormatRate(double per_s) { return FormatCount(per_s) + "/s"; }

std::string FormatPercent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100.0);
  return buf;
}

std::string FormatBytes(int64_t bytes) {
  char buf[32];
  if (bytes < 1024 && bytes > -1024) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    return buf;
  }
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  // Round first so 1023.9 KiB shows as "1.00 MiB", not "1024 KiB".
  while (u + 1 < 5 && std::fabs(v) >= 999.5) {
    v /= 1024.0;
    ++u;
  }
  const double a = std::fabs(v);
  const char* fmt = a < 9.995 ? "%.2f %s" : a < 99.95 ? "%.1f %s" : "%.0f %s";
  std::snprintf(buf, sizeof buf, fmt, v, kUnits[u]);
  return buf;
}

std::string PadLeft(const std::string& s, int width) {
  if (width <= 0) return "";
  const int w = DisplayWidth(s);
  if (w >= width) return TruncateToWidth(s, width);
  return std::string(static_cast<size_t>(width - w), ' ') + s;
}

std::string PadRight(const std::string& s, int width) {
  if (width <= 0) return "";
  const int w = DisplayWidth(s);
  if (w > width) return TruncateToWidth(s, width);
  return s + std::string(static_cast<size_t>(width - w), ' ');
}

}  // namespace sy::console
