// File: console/app/live_session.h
//
// LiveSession: everything the live console does besides drawing. A receiver
// thread takes messages from the Subscriber and hands each to the Collector
// and (when recording) to the store Writer; commands go out through a
// CommandSender, and each command with its reply is logged in the Collector
// and recorded with Writer::RecordCommand. When the engine's heartbeats stop
// (connection "lost") the run is marked abnormal in the store, once; a
// lifecycle "stop" event instead ends it normally.
//
//   ASSIGN_OR_RETURN(auto live, LiveSession::Start(opts));
//   Snapshot s = live->collector().TakeSnapshot();
//   live->SendCommand(*ParseCommand("pause"));
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "console/app/command_sender.h"
#include "console/collect/collector.h"
#include "store/store.h"
#include "telemetry/subscriber.h"

namespace sy::console {

struct LiveOptions {
  std::string connect = "tcp://127.0.0.1:5555";
  std::string control = "tcp://127.0.0.1:5556";
  std::string db_path;  // "" = do not record
  // A store shared with other LiveSessions (several engines, one console
  // session; see engine_set.h). Not owned; must outlive the LiveSession.
  // When set, db_path is ignored.
  store::Writer* writer = nullptr;
  std::chrono::milliseconds command_timeout{3000};
  CollectorOptions collector;
  // CURVE keys for an engine that requires them; used by both sockets.
  std::optional<telemetry::CurveClient> curve = std::nullopt;
};

struct LiveSummary {
  int64_t received = 0;
  int64_t gaps = 0;
  int64_t malformed = 0;
  int64_t written = 0;
  int64_t dropped = 0;
  std::string store_error;
};

class LiveSession {
 public:
  // Opens the store first (so a bad --db fails before anything else), then
  // connects. Errors: the Writer's (UNAVAILABLE, DATA_LOSS, ...) with the
  // path as context; INVALID_ARGUMENT for a bad endpoint.
  static Result<std::unique_ptr<LiveSession>> Start(const LiveOptions& options);
  // Stops the threads, then flushes and closes the store.
  ~LiveSession();

  Collector& collector() { return collector_; }
  // Queues an engine command; its outcome arrives in the Log view and via
  // TakeCommandMessages().
  void SendCommand(ParsedCommand command);
  // One-line results of finished commands since the last call: (text, error).
  std::vector<std::pair<std::string, bool>> TakeCommandMessages();
  // Questions raised by replies since the last call, for Controller::Ask: a
  // `:rebalance` dry run whose plan moves experts asks whether to apply it
  // (the plan table is in the Log by then).
  struct Question {
    std::string text;  // ends in "(y/n)"
    ParsedCommand command;
  };
  std::vector<Question> TakeQuestions();
  // True once the engine published its lifecycle "stop" event.
  bool stop_seen() const { return stop_seen_.load(); }
  // True once the run is over for this console: its "stop" event arrived, or
  // the engine was lost (heartbeats stopped; the run was marked abnormal). A
  // stop event dropped on an overloaded wire still ends in the second way.
  bool run_over() const { return run_over_.load(); }
  // Flushes the store (tests, headless exit) and returns the counters.
  LiveSummary Finish();
  LiveSummary summary() const;

 private:
  explicit LiveSession(const LiveOptions& options);
  void ReceiveLoop();
  void UpdateCounters();  // REQUIRES: called on the receiver thread
  void OnCommandDone(const CommandOutcome& o);

  const LiveOptions options_;
  Collector collector_;
  std::unique_ptr<store::Writer> owned_writer_;        // opened from db_path
  store::Writer* writer_ = nullptr;                    // owned_writer_ or LiveOptions::writer
  std::unique_ptr<telemetry::Subscriber> subscriber_;  // used only by receiver_
  std::unique_ptr<CommandSender> sender_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_seen_{false};
  std::atomic<bool> run_over_{false};
  mutable std::mutex mu_;
  std::deque<std::pair<std::string, bool>> command_messages_;  // GUARDED_BY(mu_)
  std::vector<Question> questions_;                            // GUARDED_BY(mu_)
  TransportCounters transport_;                                // GUARDED_BY(mu_)
  std::string ended_run_;  // receiver thread only: run already marked ended
  std::thread receiver_;
};

}  // namespace sy::console
