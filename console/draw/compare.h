// File: console/draw/compare.h
//
// DrawCompare: a Comparison (console/collect/compare.h) as a bordered panel
// of exactly r.w x r.h cells: the two windows, the one-line summary, the
// overview figures (A, B, change) and the top kernels by share of kernel time
// with their change in points. Pure, like every panel: the `:compare`
// overlay in replay and `moe-console --compare` both draw it.
//
// Thread-safety: a pure function.
#pragma once

#include "console/collect/compare.h"
#include "console/draw/grid.h"

namespace sy::console {

Grid DrawCompare(const Comparison& c, Rect r);
// Rows DrawCompare needs to show all of `c` (borders included).
int CompareHeight(const Comparison& c);

}  // namespace sy::console
