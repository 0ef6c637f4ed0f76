// File: console/collect/snapshot.h
//
// Snapshot: an immutable picture of everything the console shows, produced by
// Collector::TakeSnapshot() and handed to the pure draw functions. Live and
// replay produce the same Snapshot, so every panel works on both.
//
// Units: times in microseconds unless named *_s; rates per second of engine
// time (the envelope's `t`), so a replay at 4x shows the rates of the run,
// not of the playback.
//
// Thread-safety: a value; copy freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/protocol.h"

namespace sy::console {

// Where the data comes from and how fresh it is. Live states are computed
// from the age of the last heartbeat against its announced interval.
enum class ConnState {
  kWaiting,   // live, nothing received yet
  kLive,      // heartbeat age <= 2 intervals
  kDegraded,  // 2 < age <= 5 intervals
  kLost,      // age > 5 intervals: engine gone or network cut
  kReplay,    // reading a stored run
  kEnded,     // the engine announced the run's end (lifecycle "stop"): no
              // heartbeat is due, so their absence is not a loss
};
const char* ConnStateName(ConnState s);  // "waiting", "live", ...

enum class LogLevel { kInfo, kWarn, kError, kCommand };

struct LogLine {
  LogLine() = default;
  // A constructor (not an aggregate) so lines made as {t, level, text} keep
  // compiling and get no `kind`.
  LogLine(int64_t t, LogLevel l, std::string s, std::string k = "")
      : t_us(t), level(l), text(std::move(s)), kind(std::move(k)) {}

  int64_t t_us = -1;  // engine time when known, else -1
  LogLevel level = LogLevel::kInfo;
  std::string text;
  // The engine event's kind ("switch", "policy", "calibrate", "rebalance",
  // "lifecycle", ...) for event lines; "" for console-side lines. The Log
  // view's kind filter reads it.
  std::string kind;
};

struct Percentiles {
  int64_t p50_us = 0;
  int64_t p99_us = 0;
  int count = 0;  // requests the percentiles cover
};

// One kernel name aggregated over devices and over the KernelStats steps the
// Collector keeps (CollectorOptions::kernel_steps_kept; with one step kept
// these are that step's figures).
struct KernelRow {
  std::string name;
  std::string kind;  // "compute" | "comm"
  int count = 0;     // calls, all devices, all kept steps
  int64_t total_us = 0;
  int64_t mean_us = 0;  // total_us / count: per call
  int64_t max_us = 0;   // longest single call
  double share = 0;     // total_us / sum of all kernels' total_us, 0..1
  // Time per step per device (the step's total_us over the devices that
  // reported in it; 0 in steps where the kernel did not run), over the kept
  // steps: mean and nearest-rank percentiles.
  int steps = 0;  // kept steps the figures cover
  int64_t step_mean_us = 0;
  int64_t step_p50_us = 0;
  int64_t step_p99_us = 0;
};

// The spans of one step (trace level "full"), ordered by (device, start).
struct StepSpans {
  int64_t step = -1;
  int64_t t_us = 0;  // envelope time
  std::vector<telemetry::Span> spans;
};

// Replay clock as shown in the header ("REPLAY 12.3s/60.0s x2 PLAYING").
struct ReplayClock {
  double position_s = 0;
  double duration_s = 0;
  double speed = 1;
  bool playing = false;
};

// The latest live expert rebalance, from `rebalance` events and the
// `rebalance_auto` reply (docs/PROTOCOL.md "event"). Balancedness is mean /
// max device load (1.0 = perfect), averaged over layers here.
struct RebalanceStatus {
  std::string phase;  // "" (none seen), "planned", "layer", "done", "measured", "failed"
  int64_t t_us = -1;  // engine time of the latest rebalance event
  int layers_planned = 0;
  int layers_done = 0;
  int experts_moved = 0;
  int64_t bytes = 0;
  double before = 0;  // mean over layers
  double after = 0;   // predicted by the plan
  double longest_pause_ms = 0;
  // "measured" (32 steps after done): balancedness of the tokens really
  // routed before and after, and the MoE time per step.
  double measured_before = 0;
  double measured_after = 0;
  double moe_ms_before = 0;
  double moe_ms_after = 0;
  std::string error;  // failed: the engine's message
  bool rolled_back = false;
  // Auto mode as the engine last confirmed it (rebalance_auto reply).
  bool auto_known = false;
  int auto_every = 0;  // steps; 0 = off
  double auto_min_gain = 0;
  int auto_window = 0;
  std::string auto_last;  // latest "auto" event: "skipped: ..." / "started: ..."
};

// TP <-> EP switching (docs/PROTOCOL.md "meta".policy and the "switch",
// "policy" and "calibrate" events).

// The switch policy as the engine last stated it (meta.policy or a `policy`
// reply). known is false for engines that send no policy.
struct SwitchPolicy {
  bool known = false;
  std::string mode;         // "manual" | "auto"
  int t_high = 0;           // T_h: batch at which TP switches to EP at once
  double t_low = 0;         // T_l in effect: EP switches to TP when the window mean is below
  bool t_low_auto = false;  // T_l follows 0.8 T_h
  int window = 0;           // steps the mean covers
  int cooldown = 0;         // steps between switches
  int queue = 0;            // queued requests that send TP to EP at T_h (0: off or not reported)
  std::string rollout;      // "auto" | "on" | "off"
  std::string describe;     // the engine's one-line description
};

// One `switch` event: done, failed (rolled back) or refused.
struct SwitchMark {
  int64_t t_us = -1;  // engine time of the event
  int64_t step = -1;  // newest step seen when it arrived (-1: none yet)
  std::string phase;  // "done" | "failed" | "refused"
  std::string from;   // "EP" | "TP"
  std::string to;
  double total_ms = 0;  // done: the serving pause
  bool rolled_back = false;
  std::string why;  // "command" | "policy: <reason>"; failed/refused: the error
};

// The auto policy's latest decision (a `policy` event).
struct PolicyDecision {
  int64_t t_us = -1;  // -1: none seen
  int64_t step = -1;
  std::string action;   // "none" | "switch_to_tp" | "switch_to_ep"
  std::string why;      // "above_high", "below_low", "cooldown", ...
  std::string message;  // the engine's reason, e.g. "batch 70 >= T_h 64: switch to EP now"
  int batch = 0;
  double mean = 0;  // window mean batch (EP)
  int cooldown_left = 0;
};

struct CalibrationPoint {
  int batch = 0;
  double tp_ms = 0;  // decode step latency in the TP layout
  double ep_ms = 0;
  std::string faster;  // "TP" | "EP" | ... as the engine names it
};

// The latest `calibrate` run.
struct CalibrationStatus {
  std::string phase;  // "" (none), "started", "done", "failed"
  int64_t t_us = -1;
  std::vector<int> batches;              // started: the batch sizes being measured
  std::vector<CalibrationPoint> points;  // done: by batch
  std::string kind;            // "crossover" | "tp_everywhere" | "ep_everywhere" | "unstable"
  bool has_crossover = false;  // crossover_batch, t_high and t_low are set
  double crossover_batch = 0;
  int t_high = 0;
  double t_low = 0;
  bool applied = false;  // the thresholds went into the policy
  std::string summary;
  std::string error;  // failed
};

struct ParallelStatus {
  std::string layout;  // "EP" | "TP" from the newest meta ("" before it)
  SwitchPolicy policy;
  std::vector<SwitchMark> switches;  // oldest first, bounded
  int switches_done = 0;             // this run, including those fallen off
  int switches_failed = 0;
  int switches_refused = 0;
  PolicyDecision decision;
  CalibrationStatus calibration;
};

struct Snapshot {
  ConnState conn = ConnState::kWaiting;
  double heartbeat_age_s = 0;  // live only; wall seconds since last heartbeat

  // Run identity (from Meta; empty until the first Meta arrives).
  bool have_meta = false;
  telemetry::Meta meta;
  std::string run;
  std::string engine_state;  // "running" | "paused" | "stopping" | "" (unknown)
  bool paused = false;
  std::string trace_level;   // "off" | "summary" | "full" | ""
  bool run_stopped = false;  // lifecycle "stop" event seen for `run`
  int64_t latest_t_us = 0;   // newest envelope time seen
  int64_t latest_step = -1;

  // Per-second series of engine time, oldest first, the newest (possibly
  // partial) second last. Equal lengths; at most Collector's series_seconds.
  std::vector<double> prefill_tps;
  std::vector<double> decode_tps;
  std::vector<double> batch;  // mean requests per step in that second
  std::vector<double> running;
  std::vector<double> waiting;
  // Engine second (t_us / 1e6, floored) of the newest series point; the
  // series cover [series_end_s - size + 1, series_end_s].
  int64_t series_end_s = 0;
  double cur_prefill_tps = 0;  // last value of the series (0 when empty)
  double cur_decode_tps = 0;
  int cur_batch = 0;  // latest step's batch_requests
  int cur_running = 0;
  int cur_waiting = 0;
  int64_t finished_total = 0;
  int64_t generated_total = 0;

  Percentiles ttft;  // over the most recent completed requests
  Percentiles tpot;

  // Latest step's spans (trace level "full"), ordered by start.
  int64_t spans_step = -1;
  std::vector<telemetry::Span> spans;
  // The last CollectorOptions::span_steps_kept steps' spans, oldest first
  // (shared and immutable, so a Snapshot copy stays cheap); the newest is
  // spans_step / spans. The Kernels view selects one of them.
  std::vector<std::shared_ptr<const StepSpans>> span_steps;
  // KernelStats aggregated over devices and the kept steps (newest
  // kstats_step), by share descending.
  int64_t kstats_step = -1;
  std::vector<KernelRow> top_kernels;

  // Both pools and the prefix cache per device (latest Occupancy), ordered
  // by device. The cache_* figures are 0 when the engine runs without a
  // prefix cache (or predates it).
  std::vector<telemetry::DeviceOccupancy> kv;

  // Latest Requests message: running and waiting requests (lists capped by
  // the engine, real counts in *_total). have_requests is false until one
  // arrives (engines before the requests stream never send one).
  bool have_requests = false;
  telemetry::Requests requests;
  // Most recent finished requests, newest last; at most
  // CollectorOptions::finished_kept.
  std::vector<telemetry::RequestDone> finished;
  int64_t retractions = 0;  // scheduler "retract" events seen this run

  // Routed tokens summed over the last `expert_window_steps` ExpertLoad
  // messages: expert_counts[layer][expert]; per-device totals through the
  // current placement (below), i.e. each expert's tokens split over its
  // replicas; expert_device is the newest message's map (or Meta's).
  int expert_window_steps = 0;  // how many steps the sums cover
  std::vector<std::vector<int64_t>> expert_counts;
  std::vector<int64_t> expert_totals;  // per expert, all layers
  std::vector<int64_t> device_tokens;  // per device
  std::vector<int> expert_device;

  // Expert placement (EPLB) from the newest ExpertLoad that carried one:
  // phy2log[layer][slot] -> logical expert, slot_device[slot] -> device.
  // Engines before EPLB send none; then phy2log is one slot per expert
  // (identity) and slot_device is expert_device, so the slot map still
  // shows where each expert lives. Empty until an ExpertLoad arrives.
  std::vector<std::vector<int>> phy2log;
  std::vector<int> slot_device;
  bool placement_reported = false;  // phy2log came from the engine
  // Window tokens per physical slot under the current placement:
  // expert_counts[layer][e] split evenly over e's replicas in that layer.
  std::vector<std::vector<double>> slot_tokens;
  // Balancedness per layer (mean / max device load, 1.0 = perfect): the
  // mean over the window's steps, and its trend as one point per second of
  // engine time (oldest first, at most series_seconds points per layer).
  // From the engine's `balancedness`, or computed from counts and the
  // expert -> device map for engines that do not send it.
  std::vector<double> balancedness;
  std::vector<std::vector<double>> balancedness_trend;  // [layer][second]
  RebalanceStatus rebalance;
  ParallelStatus parallel;  // layout, switch policy, switches, calibration

  std::vector<LogLine> log;  // oldest first, bounded

  // Counters.
  int64_t received = 0;   // messages consumed
  int64_t gaps = 0;       // from the Subscriber (live) or seq holes (replay)
  int64_t malformed = 0;  // from the Subscriber
  int64_t steps_seen = 0;
  int64_t requests_seen = 0;
  int64_t spans_seen = 0;      // individual spans
  int64_t engine_dropped = 0;  // publisher drops reported in heartbeats
  bool have_store = false;
  int64_t store_written = 0;
  int64_t store_dropped = 0;
  std::string store_error;  // empty when the writer is healthy
  std::string db_path;

  ReplayClock replay;  // meaningful when conn == kReplay
};

}  // namespace sy::console
