// File: console/draw/overview_sections.h
//
// The TP <-> EP parts of the Overview (console/draw/overview.cc composes
// them): the layout timeline strip under the queue sparklines, and the
// policy, switch, decision and calibration rows under the run description.
// Each draws at row `y` and returns the row after its last; rows past the
// Grid's bottom are cut by the Grid. Internal to console/draw/.
//
// Thread-safety: pure functions writing only the Grid they are given.
#pragma once

#include "console/collect/snapshot.h"
#include "console/draw/grid.h"

namespace sy::console::overview {

// "layout        EP  ───────T━━━━━━━━━E──────": the label and current layout
// in the label/value columns, then from `chart_x` one column per second of
// engine time on the axis of the one-row sparklines above it (newest at the
// right edge, s.series_end_s): '─' EP, '━' TP, and at a switch's second its
// marker: the target layout's letter (done), '✗' (failed, rolled back) or
// '!' (refused). Nothing before the first meta.
int DrawLayoutStrip(Grid& g, int y, const Snapshot& s, int label_w, int value_w);

// Up to four rows, each only when it has something to say:
//   Policy   auto    [████████░░░░┆░░░┃░░░] batch 7  T_l┆51.2  T_h┃64  W 32  C 16
//   Switches 3 done, 1 failed; last EP->TP 12.5 ms at 34.2s (command)
//   Decision step 120: batch 70 >= T_h 64: switch to EP now
//   Calib    crossover batch 23.4: T_h 24, T_l 19.2 applied, 4 points
// The gauge fills to the running batch on a scale of 1.5 T_h (or the batch
// when larger).
int DrawSwitchRows(Grid& g, int y, const Snapshot& s, int label_w);

// The calibration's curves when a calibration is done: a title row, then per
// measured batch the TP and EP step latency as two bars on one scale (the
// faster one bold), with a row marking the crossover between the two points
// it lies between. Draws nothing without a done calibration.
int DrawCalibrationCurves(Grid& g, int y, const Snapshot& s);

}  // namespace sy::console::overview
