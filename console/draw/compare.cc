#include "console/draw/compare.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "console/draw/format.h"
#include "console/draw/theme.h"

namespace sy::console {
namespace {

constexpr int kNameW = 16;
constexpr int kValueW = 12;

std::string FormatFigure(const FigureDelta& d, double v, const std::string& text) {
  using Unit = FigureDelta::Unit;
  switch (d.unit) {
    case Unit::kRate:
      return FormatRate(v);
    case Unit::kCount: {
      char buf[32];
      std::snprintf(buf, sizeof buf, v == static_cast<int64_t>(v) ? "%.0f" : "%.1f", v);
      return buf;
    }
    case Unit::kUs:
      return FormatUs(static_cast<int64_t>(v + 0.5));
    case Unit::kFraction:
      return FormatPercent(v);
    case Unit::kText:
      return text;
  }
  return "";
}

Style VerdictStyle(int verdict, Style base) {
  if (verdict > 0) return Style{Color::kGreen, base.bg, kBold};
  if (verdict < 0) return Style{Color::kRed, base.bg, kBold};
  return base;
}

void Border(Grid& g, int w, int h, Style st) {
  for (int x = 1; x < w - 1; ++x) {
    g.PutChar(x, 0, U'─', st);
    g.PutChar(x, h - 1, U'─', st);
  }
  for (int y = 1; y < h - 1; ++y) {
    g.PutChar(0, y, U'│', st);
    g.PutChar(w - 1, y, U'│', st);
  }
  g.PutChar(0, 0, U'┌', st);
  g.PutChar(w - 1, 0, U'┐', st);
  g.PutChar(0, h - 1, U'└', st);
  g.PutChar(w - 1, h - 1, U'┘', st);
}

std::string Points(double a, double b) {
  if (a == b) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f pts", (b - a) * 100);
  return buf;
}

}  // namespace

Grid DrawCompare(const Comparison& c, Rect r) {
  Grid g(r.w, r.h);
  if (r.w < 4 || r.h < 3) return g;
  const Style base = theme::kOverlay;
  const Style key = theme::kOverlayKey;
  g.Fill(Rect{0, 0, r.w, r.h}, U' ', base);
  Border(g, r.w, r.h, base);
  g.Put(2, 0, " Compare (Esc closes) ", key, r.w - 1);
  const int right = r.w - 1;
  const int bottom = r.h - 1;
  int y = 1;
  auto line = [&](auto&& body) {
    if (y < bottom) body(y);
    ++y;
  };
  line([&](int row) {
    int x = g.Put(2, row, "A ", key, right);
    g.Put(x, row, c.a.label, base, right);
  });
  line([&](int row) {
    int x = g.Put(2, row, "B ", key, right);
    g.Put(x, row, c.b.label, base, right);
  });
  line([&](int row) { g.Put(2, row, c.summary, key, right); });
  line([&](int row) {
    g.Put(2, row,
          PadRight("figure", kNameW) + PadLeft("A", kValueW) + PadLeft("B", kValueW) +
              PadLeft("change", kValueW),
          key, right);
  });
  for (const FigureDelta& d : c.figures) {
    line([&](int row) {
      int x = g.Put(2, row, PadRight(d.name, kNameW), base, right);
      x = g.Put(x, row, PadLeft(FormatFigure(d, d.a, d.text_a), kValueW), base, right);
      x = g.Put(x, row, PadLeft(FormatFigure(d, d.b, d.text_b), kValueW), base, right);
      g.Put(x, row, PadLeft(d.delta, kValueW), VerdictStyle(d.verdict, base), right);
    });
  }
  line([](int) {});
  line([&](int row) {
    g.Put(2, row,
          PadRight("top kernels", kNameW) + PadLeft("A share", kValueW) +
              PadLeft("B share", kValueW) + PadLeft("change", kValueW) +
              PadLeft("A mean", kValueW - 2) + PadLeft("B mean", kValueW - 2),
          key, right);
  });
  if (c.kernels.empty()) {
    line([&](int row) { g.Put(2, row, "(no kernel stats in either window)", base, right); });
  }
  // Kernels past the panel's last row are counted on that row instead.
  const int room = std::max(0, bottom - y);
  const size_t shown = c.kernels.size() <= static_cast<size_t>(room)
                           ? c.kernels.size()
                           : static_cast<size_t>(std::max(0, room - 1));
  for (size_t i = 0; i < shown; ++i) {
    const KernelDelta& k = c.kernels[i];
    line([&](int row) {
      const Style name_style = k.kind == "comm" ? Style{Color::kMagenta, base.bg, 0} : base;
      int x = g.Put(2, row, PadRight(k.name, kNameW), name_style, right);
      x = g.Put(x, row, PadLeft(FormatPercent(k.share_a), kValueW), base, right);
      x = g.Put(x, row, PadLeft(FormatPercent(k.share_b), kValueW), base, right);
      x = g.Put(x, row, PadLeft(Points(k.share_a, k.share_b), kValueW), base, right);
      x = g.Put(x, row, PadLeft(k.mean_a_us > 0 ? FormatUs(k.mean_a_us) : "-", kValueW - 2), base,
                right);
      g.Put(x, row, PadLeft(k.mean_b_us > 0 ? FormatUs(k.mean_b_us) : "-", kValueW - 2), base,
            right);
    });
  }
  if (shown < c.kernels.size()) {
    const size_t more = c.kernels.size() - shown;
    line([&](int row) {
      g.Put(2, row,
            "+" + std::to_string(more) + (more == 1 ? " more kernel" : " more kernels") +
                " (a taller terminal shows them)",
            key, right);
    });
  }
  return g;
}

int CompareHeight(const Comparison& c) {
  // Border, A, B, summary, figure header, figures, gap, kernel header,
  // kernels (or the "no kernel stats" line), border.
  const int kernels = std::max<int>(1, static_cast<int>(c.kernels.size()));
  return 2 + 4 + static_cast<int>(c.figures.size()) + 2 + kernels;
}

}  // namespace sy::console
