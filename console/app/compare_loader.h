// File: console/app/compare_loader.h
//
// Compare windows read from a store: one window of a stored run reduced to
// WindowFigures (console/collect/compare.h), `RUN[@FROM-TO]` as
// `moe-console --compare` takes it, and `:compare` in replay.
//
//   ASSIGN_OR_RETURN(Comparison c, CompareRuns(path, *ParseCompareSide("r1@0-30s"),
//                                              *ParseCompareSide("r1@30s-")));
//
// A window is read through store::Reader::Messages in bounded chunks, so a
// long window costs time, not memory.
//
// Thread-safety: functions over a Reader the caller uses from one thread.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "console/app/replay_player.h"
#include "console/collect/compare.h"
#include "console/input/command_line.h"
#include "console/input/replay_commands.h"
#include "store/store.h"

namespace sy::console {

struct CompareSide {
  std::string run;  // "" = the newest run
  TimeRange range;  // clamped to the run when read
};
// "RUN", "RUN@FROM-TO" (ParseTimeRange), or "@FROM-TO" (the newest run).
// INVALID_ARGUMENT for a bad range.
Result<CompareSide> ParseCompareSide(std::string_view text);

// The figures of run `run` over `range` clamped to [0, duration]; labelled
// "<run> <from>-<to>". INVALID_ARGUMENT when the clamped window is empty.
Result<WindowFigures> LoadWindow(store::Reader& reader, const store::RunInfo& run, TimeRange range);

// Both sides from the store at `path` (NOT_FOUND for a missing run or file).
Result<Comparison> CompareRuns(const std::string& path, const CompareSide& a, const CompareSide& b);

// `:compare` in replay (args as ParseCompare leaves them): two windows of
// the played run, or `around_us` before vs after the current event (the
// player's current_event(), else the nearest event at or before the
// position; FAILED_PRECONDITION when there is none).
Result<Comparison> CompareInReplay(ReplayPlayer& player, const ParsedCommand& cmd);

}  // namespace sy::console
