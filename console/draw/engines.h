// File: console/draw/engines.h
//
// The screen when the console watches several engines (moe-console
// --connect given more than once). Pure functions of the engines' Snapshots
// (one Collector each, in --connect order), their names and the ViewState,
// like every panel (views.h); tested headless.
//
// Layout: row 0 is the engine strip (every engine's number, name and
// connection state; the selected one, or "all", highlighted); below it the
// ordinary frame (views.h DrawFrame) of
//   * the selected engine (ViewState::engine >= 0): exactly its own views;
//   * all engines (ViewState::engine == -1), view by view:
//       Overview  a per-engine table (state, run, layout, prefill and decode
//                 tok/s, running, waiting) with a sum row, above the Overview
//                 of the merged snapshot (collect/merge.h: sums of
//                 throughput, running, waiting);
//       Memory, Requests   the merged snapshot: every engine's devices
//                 (renumbered) and requests in one list;
//       Kernels, Experts, Log   side by side: one band per engine, each the
//                 engine's own view under a title row (kernels, expert
//                 placement and events do not add up across engines).
//   Header and status line show the merged snapshot.
// With one engine the frame is DrawFrame's, unchanged (no strip).
//
//   std::vector<Snapshot> snaps = engines.TakeSnapshots();
//   Grid frame = DrawEngineFrame(snaps, names, view, 120, 40);
#pragma once

#include <string>
#include <vector>

#include "console/collect/snapshot.h"
#include "console/draw/grid.h"
#include "console/draw/view_state.h"

namespace sy::console {

// REQUIRES: names.size() == engines.size().
Grid DrawEngineFrame(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
                     const ViewState& v, int width, int height);

// Row 0 of the frame: " engines  all  1 NAME live  2 NAME lost ...".
Grid DrawEngineStrip(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
                     const ViewState& v, int width);

// The Overview's per-engine table: a heading row, one row per engine and a
// "sum" row (the figures the merged Overview below it shows). Rows beyond
// r.h are cut.
Grid DrawEngineTable(const std::vector<Snapshot>& engines, const std::vector<std::string>& names,
                     Rect r);

}  // namespace sy::console
