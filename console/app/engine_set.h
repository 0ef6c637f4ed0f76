// File: console/app/engine_set.h
//
// EngineSet: the live console's engines. `moe-console --connect` may be given
// several times (data-parallel ranks, a prefill and a decode engine); each
// engine gets its own LiveSession (subscriber, Collector, command sender),
// and all of them record into one store::Writer, so each engine's stream is
// its own run and the runs share one `sessions` row (docs/STORE.md
// "sessions"). With one --connect it is exactly the single-engine console.
//
//   ASSIGN_OR_RETURN(auto engines, ResolveEngines({"tcp://a:5555", "tcp://b:5555"}, {}));
//   EngineSetOptions o;
//   o.engines = engines;
//   o.db_path = "/tmp/runs.db";
//   ASSIGN_OR_RETURN(auto set, EngineSet::Start(o));
//   std::vector<Snapshot> snaps = set->TakeSnapshots();
//   set->Send(1, *ParseCommand("pause"));  // engine 2 only
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "console/app/live_session.h"
#include "store/store.h"

namespace sy::console {

// One engine's endpoints.
struct EngineEndpoints {
  std::string telemetry;  // the engine's PUB (moe-engine --telemetry)
  std::string control;    // its ROUTER (moe-engine --control)
};

// The engines named by the --connect and --control flags.
//   connects: each "TELEMETRY" or "TELEMETRY,CONTROL"; empty = one engine at
//             the defaults (tcp://127.0.0.1:5555, control `control` or
//             tcp://127.0.0.1:5556).
//   control:  --control when given. With one --connect it is that engine's
//             control endpoint unless the --connect names one (backward
//             compatible: `--connect T --control C`). With several it is
//             refused: each engine's control goes after its comma.
// A --connect without CONTROL among several takes the engine's default
// pairing, TELEMETRY's port + 1 (5555 -> 5556) for tcp://HOST:PORT; other
// transports (ipc://) must name it.
// INVALID_ARGUMENT, naming the offending flag value, for an empty part, a
// third comma-separated part, a missing control that cannot be derived, the
// same telemetry endpoint twice, or --control with several engines.
Result<std::vector<EngineEndpoints>> ResolveEngines(const std::vector<std::string>& connects,
                                                    const std::optional<std::string>& control);

struct EngineSetOptions {
  std::vector<EngineEndpoints> engines;  // at least one
  std::string db_path;                   // "" = do not record
  std::chrono::milliseconds command_timeout{3000};
  CollectorOptions collector;
  // CURVE keys for engines that require them (--client-key,
  // --server-public-key); the same for every engine.
  std::optional<telemetry::CurveClient> curve = std::nullopt;
};

class EngineSet {
 public:
  // Opens the store (once, for every engine; sessions.hosts lists the
  // telemetry endpoints), then connects each engine in order. Errors: the
  // store's, with its path; an engine's, with "engine N" and its endpoint.
  static Result<std::unique_ptr<EngineSet>> Start(const EngineSetOptions& options);
  // Stops every engine's threads, then drains and closes the store.
  ~EngineSet();

  int size() const { return static_cast<int>(sessions_.size()); }
  // REQUIRES: 0 <= i < size().
  LiveSession& engine(int i) { return *sessions_[i]; }
  // What the strip and the Log call engine i: its telemetry endpoint.
  const std::string& name(int i) const { return options_.engines[i].telemetry; }
  std::vector<std::string> names() const;
  // One Snapshot per engine, in --connect order.
  std::vector<Snapshot> TakeSnapshots();

  // Sends to engine `engine` (0-based), or to every engine when engine < 0.
  // Out-of-range engines are ignored (the Controller validates them).
  void Send(int engine, const ParsedCommand& command);
  // Finished commands of every engine, "engine N: " prefixed when there
  // are several.
  std::vector<std::pair<std::string, bool>> TakeCommandMessages();
  struct Question {
    int engine = 0;
    LiveSession::Question question;
  };
  std::vector<Question> TakeQuestions();
  // True once every engine published its lifecycle "stop" event.
  bool all_stopped() const;
  // True once every engine's run is over: stopped, or lost (LiveSession::run_over).
  bool all_over() const;
  // Stops receiving on every engine, flushes the store, and returns the
  // transport counters summed over engines with the store's counters.
  LiveSummary Finish();
  const std::string& db_path() const { return options_.db_path; }

 private:
  explicit EngineSet(const EngineSetOptions& options) : options_(options) {}

  const EngineSetOptions options_;
  std::unique_ptr<store::Writer> writer_;  // declared first: outlives the sessions
  std::vector<std::unique_ptr<LiveSession>> sessions_;
};

}  // namespace sy::console
