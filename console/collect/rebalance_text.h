// File: console/collect/rebalance_text.h
//
// How the console words an expert rebalance: the plan table of a `rebalance`
// reply, the log lines of `rebalance` events, and what those events change
// in RebalanceStatus. Shapes are those of docs/PROTOCOL.md ("event", 7.4).
//
//   for (const std::string& line : PlanLines(reply.result["plan"])) log(line);
//   //   "plan: 5 experts move (2.50 MiB) over 2 of 4 layers, window 100"
//   //   "  layer  before  after   moved"
//   //   "  L0      0.61    0.93      3" ...
//
// The wire only promises that `detail` is an object, so every reader here is
// lenient: a missing or mistyped field reads as 0 (or "") and is never an
// error; the text then simply lacks that figure.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "console/collect/snapshot.h"
#include "telemetry/protocol.h"

namespace sy::console {

// The figures of a plan object {"layers":[...],"experts_moved","bytes","window"}.
struct PlanSummary {
  int layers = 0;        // layers in the plan
  int layers_moved = 0;  // layers with moved > 0
  int experts_moved = 0;
  int64_t bytes = 0;
  int window = 0;
  double before = 0;  // mean over layers (1.0 when there are none)
  double after = 0;
};
PlanSummary SummarizePlan(const nlohmann::json& plan);

// "2.50 MiB", "640 KiB", "512 B".
std::string FormatMoveBytes(int64_t bytes);

// A summary line, then one row per layer: before -> after and experts moved.
// Layers where nothing moves are listed too (the table shows every layer's
// prediction); at most `max_layers` rows, then "  … N more layers".
std::vector<std::string> PlanLines(const nlohmann::json& plan, int max_layers = 64);

// The y/n question asked after a dry run, e.g.
// "Apply: 5 experts, 2.50 MiB, balancedness 0.66 -> 0.94? (y/n)".
std::string PlanQuestion(const PlanSummary& p);

// Log lines for an event of kind "rebalance" (the first is the headline).
std::vector<std::string> RebalanceEventLines(const telemetry::Event& e);
// Folds an event of kind "rebalance" into `st`; others are ignored.
void ApplyRebalanceEvent(const telemetry::Event& e, RebalanceStatus& st);
// Folds a `rebalance_auto` reply {"every","min_gain","window"} into `st`.
void ApplyRebalanceAutoResult(const nlohmann::json& result, RebalanceStatus& st);

}  // namespace sy::console
