// File: console/collect/merge.h
//
// MergeSnapshots: one Snapshot standing for several engines (moe-console
// --connect given more than once, e.g. data-parallel ranks, or a prefill and
// a decode engine), for the views that read as a whole: Overview, Memory,
// Requests and the header and status lines when "all" engines are selected.
//
//   std::vector<Snapshot> per_engine = ...;  // one Collector each
//   Snapshot all = MergeSnapshots(per_engine);
//   // all.cur_decode_tps == sum of per_engine[i].cur_decode_tps
//
// What merging means, field by field:
//   * Sums: throughput and batch series and their current values, running,
//     waiting, finished and generated totals, devices, counters (received,
//     gaps, malformed, steps/requests/spans seen, engine drops), requests
//     in flight and their totals, retractions.
//   * Series are aligned on their newest point: each engine's clock starts
//     with its own run, so "the last second" of each is the only common
//     instant; a shorter series contributes to the newest seconds only.
//   * Percentiles cannot be added: count is the sum, p99 the largest p99
//     (an upper bound), p50 the count-weighted mean of the p50s (an
//     approximation, exact when the engines agree).
//   * Memory: every engine's devices, in engine order, renumbered so device
//     ids stay distinct (engine 2's device 0 follows engine 1's last).
//   * Identity: meta of the first engine that has one, with devices summed
//     and the layouts and presets joined ("EP/TP") when they differ; run is
//     "" (several); the state is the worst connection (lost > degraded >
//     waiting > live), "running" if any engine runs, paused only if all do.
//   * Per-engine detail (spans, kernels, experts, log) is not merged: the
//     frame shows those per engine (console/draw/engines.h).
//   * Store counters: those of the first engine (the engines share one
//     store::Writer, so every engine reports the same figures).
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "console/collect/snapshot.h"

namespace sy::console {

// An empty input gives a default Snapshot; one engine gives it back unchanged.
Snapshot MergeSnapshots(const std::vector<Snapshot>& engines);

}  // namespace sy::console
