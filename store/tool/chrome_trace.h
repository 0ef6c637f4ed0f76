// File: store/tool/chrome_trace.h
//
// Exports one stored run as Chrome Trace Event Format JSON (the "JSON Object
// Format": {"traceEvents": [...], ...}), which ui.perfetto.dev and
// chrome://tracing load. docs/STORE.md "moe-store" describes the mapping:
//
//   process (pid = runs.rid)   the run, named "<id> · <model> · N devices"
//   thread per track           "steps", "device D compute", "device D comm"
//                              (one per span kind), "events: <kind>",
//                              "operator commands"; sorted in that order
//   "ph":"X"                   every span and every step: ts/dur in µs of
//                              engine time (since the run started)
//   "ph":"C"                   occupancy: running/waiting, tokens, KV pages
//                              and recurrent-state slots per device
//   "ph":"i"                   events (switches, rebalances, commands, ...) and
//                              the operator commands the console recorded
//   "ph":"M"                   process_name, process_sort_index,
//                              thread_name, thread_sort_index
//
// Nesting: on every (pid, tid) the complete events nest (each one lies
// inside, or after the end of, the ones before it). Stored spans of one
// device and kind that overlap without nesting go to overflow tracks of the
// same stream ("device 0 compute #2"), chosen greedily: a span goes to the
// first track where it nests, in time order (start, then longer first).
//
// The output is streamed: spans are read in start order straight from SQLite
// (which sorts on disk when it must) and written in chunks to `sink`, so
// memory stays flat for runs of millions of spans.
//
// Thread-safety: over a Db the caller owns and uses from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/sqlite.h"

namespace sy::store::tool {

struct ExportOptions {
  std::string run;  // runs.id
  // Window in µs of engine time, inclusive at both ends. A span or step
  // [start, start + dur] is kept when it overlaps: start <= to_us and
  // start + dur >= from_us (kept whole, not clipped). Counters, events and
  // commands are kept when from_us <= t <= to_us.
  int64_t from_us = std::numeric_limits<int64_t>::min();
  int64_t to_us = std::numeric_limits<int64_t>::max();
};

struct ExportStats {
  int64_t spans = 0;            // X events from spans
  int64_t steps = 0;            // X events from steps
  int64_t counters = 0;         // C events
  int64_t instants = 0;         // i events
  int64_t tracks = 0;           // threads named
  int64_t overflow_tracks = 0;  // of those, "#2", "#3", ... tracks for overlapping spans
  int64_t bytes = 0;            // JSON written
};

// Receives the JSON in order, in chunks of about 1 MiB. An error stops the
// export and is returned.
using Sink = std::function<Status(std::string_view)>;

// INVALID_ARGUMENT when from_us > to_us; NOT_FOUND "no run '<id>' in <path>".
// Both are found before the first byte reaches `sink`. Runs in one read
// transaction (one snapshot even while a console commits).
Result<ExportStats> ExportChromeTrace(Db& db, const ExportOptions& options, const Sink& sink);

}  // namespace sy::store::tool
