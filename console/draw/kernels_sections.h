// File: console/draw/kernels_sections.h
//
// The lower tables of the Kernels view (console/draw/kernels.cc composes
// them under the lanes): top kernels over the kept steps, the selected step
// by layer, and the selected step by kind. Each draws from row `y` to at
// most row `end` (exclusive) and returns the row after its last. Internal
// to console/draw/.
//
// Thread-safety: pure functions writing only the Grid they are given.
#pragma once

#include <cstdint>
#include <vector>

#include "console/collect/snapshot.h"
#include "console/draw/grid.h"

namespace sy::console::kernels {

int DrawTopTable(Grid& g, const Snapshot& s, int y, int end);
// `step` / `spans`: the selected step (spans empty: none kept).
int DrawLayerTable(Grid& g, int64_t step, const std::vector<telemetry::Span>& spans, int y,
                   int end);
int DrawKindTable(Grid& g, int64_t step, const std::vector<telemetry::Span>& spans, int y, int end);

}  // namespace sy::console::kernels
