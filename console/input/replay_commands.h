// File: console/input/replay_commands.h
//
// The replay side of the command line: `:seek` and `:compare`, handled by the
// console itself (never sent), plus the time and range syntax that
// `moe-console --compare RUN@FROM-TO` shares with them.
//
//   seek 90s | seek 1m30s | seek 90      to 90 s of engine time
//   seek +10s | seek -1m                 relative to the replay position
//   seek step 1200                       to the first stored step >= 1200
//   compare                              30 s before vs 30 s after the current event
//   compare event [W]                    same, windows of W (e.g. 1m)
//   compare FROM-TO FROM-TO              two windows of this run, e.g. 0-30s 1m-1m30s
//
// A time is a number of seconds ("90", "1.5") or units in decreasing order
// ("1h2m3s", "1m30s", "500ms"). Parsed values travel in
// ParsedCommand::request.args (never sent): {"us": T} | {"delta_us": D} |
// {"step": N} for seek, {"around_us": W} | {"a": [F, T], "b": [F, T]} for
// compare.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "console/input/command_line.h"

namespace sy::console {

// Microseconds of a time as above. INVALID_ARGUMENT naming `text` otherwise
// (negative, empty, unknown unit, units out of order, overflow).
Result<int64_t> ParseTimeUs(std::string_view text);

// "FROM-TO" (either side may be empty: start / end of the run; "TO" <= FROM
// is an error). Returned as {from_us, to_us}; to_us = INT64_MAX when open.
struct TimeRange {
  int64_t from_us = 0;
  int64_t to_us = INT64_MAX;
  bool operator==(const TimeRange&) const = default;
};
Result<TimeRange> ParseTimeRange(std::string_view text);

// Half-width of the windows `:compare` puts around an event when not given.
inline constexpr int64_t kDefaultCompareWindowUs = 30'000'000;

// Fill out.request.args and out.text from `words` (words[0] is the command).
Status ParseSeek(const std::vector<std::string>& words, ParsedCommand& out);
Status ParseCompare(const std::vector<std::string>& words, ParsedCommand& out);

// Seconds as the console prints positions: "42.0s", "1m30.0s", "1h02m03s".
std::string FormatPosition(int64_t us);

}  // namespace sy::console
