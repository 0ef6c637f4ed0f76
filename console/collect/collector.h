// File: console/collect/collector.h
//
// Collector: turns telemetry::Message values into console state. It is the one
// place both data paths meet: the live receiver thread (Subscriber) and replay
// (store::Reader::Messages) call Consume() the same way, and the UI asks for
// an immutable Snapshot at its own pace.
//
//   Collector c;
//   c.Consume(msg);                       // receiver thread
//   Snapshot s = c.TakeSnapshot();        // UI thread
//
// Rates and series are keyed by engine time (the envelope's `t`), so they do
// not depend on how fast messages arrive. Connection state depends on wall
// time since the last message of any kind (heartbeats are what an idle engine
// sends), read from the injectable clock.
//
// Thread-safety: every method may be called from any thread (one internal
// mutex; TakeSnapshot copies under it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "console/collect/experts.h"
#include "console/collect/snapshot.h"
#include "telemetry/protocol.h"

namespace sy::console {

using SteadyClock = std::function<std::chrono::steady_clock::time_point()>;

struct CollectorOptions {
  int series_seconds = 120;      // length of the sparkline series
  int request_window = 1000;     // completed requests the percentiles cover
  int finished_kept = 64;        // finished requests listed in the Requests view
  int expert_window_steps = 64;  // ExpertLoad messages summed for the heatmap
                                 // and averaged for balancedness
  size_t log_capacity = 1000;    // lines kept; older ones fall off
  // Steps the Kernels view can step back through (spans, trace "full") and
  // the top kernels' statistics cover (kernel stats).
  int span_steps_kept = 64;
  int kernel_steps_kept = 64;
  // Heartbeat interval assumed before the first heartbeat announces one.
  int default_heartbeat_ms = 1000;
  SteadyClock clock = [] { return std::chrono::steady_clock::now(); };
};

// Transport counters as the Subscriber reports them.
struct TransportCounters {
  int64_t received = 0;
  int64_t gaps = 0;
  int64_t malformed = 0;
};

struct StoreCounters {
  int64_t written = 0;
  int64_t dropped = 0;
  std::string error;  // empty when healthy
  std::string path;
};

// Nearest-rank percentile (p in (0, 100]) of `values`; 0 when empty.
int64_t Percentile(std::vector<int64_t> values, double p);

class Collector {
 public:
  explicit Collector(CollectorOptions options = {});

  void Consume(const telemetry::Message& m);
  // Console-side log line (command echo, client errors, notes).
  void AddLog(LogLevel level, std::string text);
  // Applies what an accepted command reply says about engine state (fields
  // "paused", "state", "trace_level"/"level" in its result, the auto mode
  // settings a "rebalance_auto" reply confirms and the switch policy a
  // "policy" reply returns), so the header, the Overview and the Experts
  // view change as soon as the engine confirms.
  void ApplyCommandResult(const std::string& cmd, const nlohmann::json& result);

  // Live mode: the Subscriber's own counters replace the collector's.
  void SetTransportCounters(const TransportCounters& c);
  void SetStoreCounters(const StoreCounters& c);
  // Replay mode: conn becomes kReplay and the clock is shown.
  void SetReplayClock(const ReplayClock& c);
  // Forgets all run state (replay seek); keeps replay/store settings.
  void Reset();

  Snapshot TakeSnapshot() const;

 private:
  struct Bucket {
    int64_t second = 0;
    int64_t prefill = 0;
    int64_t decode = 0;
    int64_t batch_sum = 0;
    int steps = 0;
    int running = 0;
    int waiting = 0;
  };

  void OnMessage(const telemetry::Meta& m);
  void OnMessage(const telemetry::Step& m);
  void OnMessage(const telemetry::Spans& m);
  void OnMessage(const telemetry::KernelStats& m);
  void OnMessage(const telemetry::Occupancy& m);
  void OnMessage(const telemetry::ExpertLoad& m);
  void OnMessage(const telemetry::RequestDone& m);
  void OnMessage(const telemetry::Event& m);
  void OnMessage(const telemetry::Heartbeat& m);
  void OnMessage(const telemetry::Requests& m);
  // REQUIRES: mu_ held. `kind`: the event's kind ("" for console lines).
  void Log(int64_t t_us, LogLevel level, std::string text, std::string kind = "");
  void ResetLocked();  // REQUIRES: mu_ held

  const CollectorOptions options_;
  mutable std::mutex mu_;
  Snapshot s_;                                       // GUARDED_BY(mu_): fields filled incrementally
  std::deque<Bucket> buckets_;                       // GUARDED_BY(mu_)
  std::deque<int64_t> ttft_;                         // GUARDED_BY(mu_)
  std::deque<int64_t> tpot_;                         // GUARDED_BY(mu_)
  std::deque<telemetry::RequestDone> finished_;      // GUARDED_BY(mu_)
  ExpertTracker experts_;                            // GUARDED_BY(mu_)
  std::deque<LogLine> log_;                          // GUARDED_BY(mu_)
  std::deque<telemetry::KernelStats> kstats_;        // GUARDED_BY(mu_) newest last
  std::map<std::string, uint64_t> next_seq_;         // GUARDED_BY(mu_) per topic
  int64_t own_received_ = 0;                         // GUARDED_BY(mu_)
  int64_t own_gaps_ = 0;                             // GUARDED_BY(mu_)
  bool have_transport_ = false;                      // GUARDED_BY(mu_)
  TransportCounters transport_;                      // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_beat_;  // GUARDED_BY(mu_)
  int heartbeat_ms_;                                 // GUARDED_BY(mu_)
  bool replay_ = false;                              // GUARDED_BY(mu_)
};

}  // namespace sy::console
