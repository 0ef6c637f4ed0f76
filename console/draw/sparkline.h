// File: console/draw/sparkline.h
//
// Sparklines for the overview: a one-row block sparkline ("▁▂▄█") and a
// multi-row braille chart (2 samples per cell horizontally, 4 dot rows per
// cell vertically). Both show the newest samples at the right edge and scale
// to `max` (or to the largest sample when max <= 0).
//
// Pure functions; the result has exactly `width` scalars per row, each one
// column wide, so it can be placed with Grid::Put without overflow.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace sy::console {

// One row, one sample per column: ' ' for 0, then ▁..█ in 8 steps.
// Non-finite or negative samples count as 0. width <= 0 gives "".
std::u32string BlockSparkline(std::span<const double> values, int width, double max = 0);

// `rows` rows (top first), two samples per column. A positive sample always
// lights at least the bottom dot so activity is never invisible.
std::vector<std::u32string> BrailleChart(std::span<const double> values, int width, int rows,
                                         double max = 0);

}  // namespace sy::console
