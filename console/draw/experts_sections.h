// File: console/draw/experts_sections.h
//
// The sections of the Experts view (console/draw/experts.cc composes them).
// Each draws at row `y` of a Grid tall enough for the whole view and returns
// the row after its last; the view then shows a window of those rows
// (scrolling). Internal to console/draw/.
//
// Thread-safety: pure functions writing only the Grid they are given.
#pragma once

#include "console/collect/snapshot.h"
#include "console/draw/grid.h"
#include "console/draw/view_state.h"

namespace sy::console::experts {

// Heat colours and shades shared by the token heatmap and the slot map:
// f = value / hottest, 0..1.
Style Heat(double f);
char32_t Shade(double f);
// Green >= 0.9, yellow >= 0.7, red below: for balancedness (1.0 = perfect).
Style ForBalance(double b);

// The layer whose slots are shown: v.expert_layer clamped to the layers the
// placement covers, or for -1 the least balanced one (the first on ties;
// layer 0 without balancedness). -1 when there is no placement.
int SlotMapLayer(const Snapshot& s, const ViewState& v);

// Rows a section needs at width w (an upper bound for the slot map).
int SlotMapRows(const Snapshot& s, int w);
int HottestRows(const Snapshot& s, int w);

// Devices x physical slots of SlotMapLayer(): each cell the logical expert
// id held by the slot, coloured by its window tokens (replicated experts
// underlined), each device's tokens in that layer at the right; then the
// slot counts and the layer's replicas.
int DrawSlotMap(Grid& g, int y, const Snapshot& s, const ViewState& v);
// The hottest (layer, expert) pairs over the window: tokens, share of the
// layer's tokens, replicas in the current placement.
int DrawHottest(Grid& g, int y, const Snapshot& s);

}  // namespace sy::console::experts
