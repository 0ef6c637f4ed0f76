// File: console/collect/parallel_text.h
//
// How the console reads and words TP <-> EP switching: the `policy` object of
// `meta` (and of the `policy` reply), and the events of kind "switch",
// "policy" and "calibrate" (docs/PROTOCOL.md "meta", "event"). Readers are
// lenient like rebalance_text.h: a missing or mistyped field reads as 0 or ""
// and the text simply lacks that figure.
//
//   ApplyPolicyJson(meta.policy, st.policy);
//   ApplyParallelEvent(event, latest_step, st);
//   for (LogLine& l : ParallelEventLines(event)) log(l);
//   //   "switch EP -> TP in 12.5 ms: weights 10.1 ms (7.9 GB/s: permute 1.2,
//   //    exchange 6.0, place 2.9), state 0.0, other 2.4; 36.0 MiB (command)"
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "console/collect/snapshot.h"
#include "telemetry/protocol.h"

namespace sy::console {

// Whether `kind` is one of "switch", "policy", "calibrate".
bool IsParallelEvent(const telemetry::Event& e);

// Folds a policy object {"mode","t_high","t_low","t_low_auto","window",
// "cooldown","rollout","describe"} into `p`. An empty object or a non-object
// (older engines) leaves `p` as it is.
void ApplyPolicyJson(const nlohmann::json& policy, SwitchPolicy& p);

// Folds a parallel event into `st`. `step` is the newest step seen when it
// arrived (events carry no step); switches beyond `max_switches` fall off the
// front of st.switches (the counters keep counting). Other events are ignored.
void ApplyParallelEvent(const telemetry::Event& e, int64_t step, ParallelStatus& st,
                        size_t max_switches = 256);

// Log lines of a parallel event, each with its level and the event's time:
// a done switch with its phase breakdown (info), a failed one (error, "rolled
// back"), a refused one (warning), a policy decision (info), calibration
// started / done with its table lines and fitted thresholds (info) / failed
// (error).
std::vector<LogLine> ParallelEventLines(const telemetry::Event& e);

// What an accepted reply to `switch`, `policy` or `calibrate` says, worded
// for the command line and the Log instead of its JSON:
//   switch     "EP -> TP in 12.5 ms" / "already TP"
//   policy     the engine's `describe` line (or mode and thresholds)
//   calibrate  "started: batches 1,4,16,64, 8 steps each; result in the Log"
//              (", prompt 512 (simulated)" after "each" when the engine says)
// "" for other commands.
std::string ParallelReplyText(const std::string& cmd, const nlohmann::json& result);

}  // namespace sy::console
