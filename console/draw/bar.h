// File: console/draw/bar.h
//
// The fill bar shared by panels that show how full something is: pools in
// the Memory view, request progress in the Requests view.
//
// Thread-safety: writes only the Grid it is given.
#pragma once

#include "console/draw/grid.h"
#include "console/draw/theme.h"

namespace sy::console {

// "[████░░░░]" of exactly `w` columns at (x, y); nothing when w < 2.
// `fraction` is clamped to [0, 1]; the filled cells take `fill`.
inline void DrawBar(Grid& g, int x, int y, int w, double fraction, Style fill) {
  if (w < 2) return;
  const int inner = w - 2;
  const double f = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
  const int full = static_cast<int>(f * inner + 0.5);
  g.PutChar(x, y, U'[', theme::kDimmed);
  for (int i = 0; i < inner; ++i) {
    g.PutChar(x + 1 + i, y, i < full ? U'█' : U'░', i < full ? fill : theme::kDimmed);
  }
  g.PutChar(x + 1 + inner, y, U']', theme::kDimmed);
}

}  // namespace sy::console
