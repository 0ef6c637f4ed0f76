// File: engine/server/engine.h
//
// Engine: the serving loop of moe-engine. It owns the ModelRunner (P device
// threads), the Scheduler, the built-in workload, the telemetry Publisher
// (PUB), the ControlServer (ROUTER) and the HTTP front end (its own threads,
// reached only through the RequestInbox / TokenStream hand-off), and runs on
// the caller's thread:
//
//   loop:  answer pending commands (never blocks); commit at most one staged
//            layer of a live rebalance and publish its events
//          submit workload arrivals whose time has come and HTTP requests
//          from the inbox; cancel requests whose HTTP client went away
//          if running and there is work: Plan -> ModelRunner::Step -> Commit,
//            then publish step, occupancy, experts, kstats (trace >= summary),
//            spans (trace full) and one request message per finished request;
//            hand each HTTP request its new tokens; update the metrics
//          else: wait on the control socket for a few ms (no spinning)
//
//   ASSIGN_OR_RETURN(auto engine, Engine::Create(options));
//   Status s = engine->Run();   // until `stop`, RequestStop() or the workload is done
//
// Commands (docs/PROTOCOL.md): describe, status, pause, resume, trace, stop,
// cancel, flush_cache, expert_stats (routed-token statistics over sliding
// windows, balancedness under the current placement, an optional JSON dump
// that `moe-engine eplb --stats` reads), rebalance (plan from a window of those
// statistics; dry_run returns the table, otherwise the weights move layer by
// layer while serving goes on, engine/eplb/applier.h), rebalance_auto, switch
// (EP <-> TP between two steps), policy (the auto switch policy) and
// calibrate (both layouts measured on a background thread).
// describe and status show both memory pools of every device (KV pages and,
// for a hybrid model, recurrent-state slots, with bytes).
// A command is answered between steps, so pause takes effect at the step
// boundary; a malformed or failing command changes nothing. Every command is
// mirrored on the event stream (received, then done or failed). With CURVE
// (EngineOptions::curve), a command the sender's role may not run is refused
// with PERMISSION_DENIED and a `security` event (engine_security.cc).
//
// Thread-safety: Run() on one thread; RequestStop() from any thread (signal
// watcher); stats() after Run() returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/entrypoints/api_request.h"
#include "engine/entrypoints/http_server.h"
#include "engine/entrypoints/metrics.h"
#include "engine/eplb/applier.h"
#include "engine/eplb/expert_stats.h"
#include "engine/eplb/rebalance_plan.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/parallelism/calibrate.h"
#include "engine/parallelism/switch_policy.h"
#include "engine/scheduler/scheduler.h"
#include "engine/server/calibrate_run.h"
#include "engine/sim/clock.h"
#include "engine/sim/sim_runner.h"
#include "engine/trace/span_recorder.h"
#include "engine/workload/workload.h"
#include "telemetry/control.h"
#include "telemetry/protocol.h"
#include "telemetry/publisher.h"

namespace sy::engine {

// Sees what the engine publishes, on the serving thread, before it is queued
// for the wire (so nothing is lost to drops): the headless scenario runner
// (scenario.h) computes its results here. Calls must be quick and must not
// call back into the Engine.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(const telemetry::Step& /*step*/) {}
  virtual void OnExpertLoad(const telemetry::ExpertLoad& /*load*/) {}
  virtual void OnRequestDone(const telemetry::RequestDone& /*done*/) {}
  virtual void OnEvent(const telemetry::Event& /*event*/) {}
};

struct EngineOptions {
  ModelConfig model;
  ModelRunnerOptions runner;
  // max_seq and vocab are overwritten from `model`.
  SchedulerOptions scheduler;
  WorkloadOptions workload;
  // false: no built-in arrivals (an engine that only answers commands).
  bool workload_enabled = true;
  telemetry::PublisherOptions publisher;
  std::string control_endpoint = "tcp://127.0.0.1:5556";
  TraceLevel trace_level = TraceLevel::kSummary;
  bool start_paused = false;
  // Return from Run() once the workload has no more arrivals and every
  // request finished. Meaningful only for a bounded workload.
  bool exit_when_done = false;
  // How long an idle loop waits on the control socket per turn: shorter is
  // snappier arrival admission, longer is fewer wake-ups.
  int idle_wait_ms = 5;
  // Empty: a fresh id from the start time and a random suffix.
  std::string run_id;
  // The OpenAI-compatible HTTP front end; off in tests that only need ZeroMQ.
  bool http_enabled = false;
  HttpServerOptions http;  // model_name, max_seq and vocab are filled from `model`
  // Waiting requests (scheduler queue plus HTTP inbox) beyond which HTTP
  // answers 503: overload is refused at the door, not queued without bound.
  int max_queue = 512;
  // Redundant expert slots (EPLB): experts + redundant_experts physical
  // slots, divided evenly over the devices; the start-up placement is EPLB's
  // over a uniform load. 0: the round-robin map.
  int redundant_experts = 0;
  // Auto rebalance: every `rebalance_every` steps (0: off) plan from the last
  // `rebalance_window` steps and apply when the mean predicted balancedness
  // gains more than `rebalance_min_gain`. The rebalance_auto command changes them.
  int rebalance_every = 0;
  double rebalance_min_gain = 0.05;
  int rebalance_window = 100;
  // Nodes for EPLB's hierarchical policy (devices split evenly over them).
  int eplb_nodes = 1;
  // The TP <-> EP switch policy (engine/parallelism/switch_policy.h); the
  // `policy` command changes it at run time. Manual by default: the layout
  // moves only on `switch`.
  PolicyOptions policy = [] {
    PolicyOptions p;
    p.mode = PolicyMode::kManual;
    return p;
  }();
  // Detokenises HTTP responses; null: the byte-level tokenizer.
  std::shared_ptr<const Tokenizer> tokenizer;
  // CURVE on both sockets (security_flags.h: --server-key, --authorized-keys;
  // `refusals` is Create's to fill). Required when either endpoint is beyond
  // loopback; then observers may only run read-only commands (telemetry/access.h).
  std::optional<telemetry::CurveServer> curve = std::nullopt;
  // `--backend sim` (engine/sim/sim_runner.h) when set: the runner is a
  // SimRunner priced by sim->hardware, `model` must be SimModelConfig(
  // sim->model, max_seq), and the engine runs on a VirtualClock at
  // `sim_speed` (0: as fast as possible; s: s x real time). sim->clock is
  // ignored (the engine owns the clock). Absent: the CPU backend on the wall clock.
  std::optional<SimOptions> sim;
  double sim_speed = 0;
  // The layout serving starts in (a switch before the first step when TP).
  ParallelMode initial_layout = ParallelMode::kEP;
  // Null: none. Must outlive the Engine.
  EngineObserver* observer = nullptr;
  // 0: an `experts` message every step. > 0: counts summed over the steps of
  // at least this many µs of the serving clock, one message each (its
  // `steps` says how many); the sim backend uses 100 ms.
  int64_t experts_every_us = 0;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t finished = 0;
  int64_t generated = 0;
  int64_t rejected = 0;    // arrivals the scheduler refused (too long, ...)
  int64_t preempted = 0;   // requests sent back to the queue for lack of KV pages
  int64_t step_us = 0;     // time spent inside steps (plan, forward, commit, publish)
  int64_t serving_us = 0;  // first step start to last step end
  int64_t dropped = 0;     // telemetry messages the publisher dropped
  int64_t cancelled = 0;   // by command or by an HTTP client that went away
  int64_t switches = 0;    // completed TP <-> EP switches
  int64_t clock_us = 0;    // the serving clock at the last step's end (sim: simulated time)
};

class Engine {
 public:
  // Builds the model, binds the PUB and ROUTER sockets. INVALID_ARGUMENT for
  // bad options; UNAVAILABLE (naming the endpoint) when a socket cannot bind.
  static Result<std::unique_ptr<Engine>> Create(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Serves until stopped. OK after `stop`, RequestStop() or a finished
  // bounded workload; INTERNAL if a model step fails (a bug).
  Status Run();
  // Asks Run() to stop at the next step boundary, like the `stop` command.
  void RequestStop() { stop_requested_.store(true); }

  EngineStats stats() const;
  const std::string& run_id() const { return run_id_; }
  // The HTTP front end's port (0 when it is off).
  int http_port() const;
  // The serving clock now, µs since the run's epoch (simulated time under
  // the sim backend). Between Create and Run it is the workload's start.
  int64_t clock_us() const { return clock_->NowUs(); }

 private:
  explicit Engine(EngineOptions options);

  Status RunStep();
  void AdmitArrivals();
  // How long to wait on the control socket when there is nothing to run;
  // moves a virtual clock to the next arrival (engine/sim/clock.h).
  std::chrono::milliseconds IdleWait();
  bool WorkloadExhausted() const { return !next_arrival_.has_value(); }

  // api_bridge.cc: the HTTP hand-off.
  void AdmitApiRequests();
  void CancelAbandoned();
  // New tokens of this step to their streams, and finished requests' ends.
  void FeedStreams(const BatchInput& batch, const StepOutput& out,
                   const std::vector<Request>& finished);
  void EndStreams(const Status& why);
  // Reports a request that left the scheduler outside a step (cancel).
  void ReportDone(const Request& r);
  Result<nlohmann::json> CancelCommand(const nlohmann::json& args);
  Result<nlohmann::json> ExpertStatsCommand(const nlohmann::json& args);

  // rebalance.cc: live expert rebalancing (engine/eplb/applier.h).
  Result<nlohmann::json> RebalanceCommand(const nlohmann::json& args);
  Result<nlohmann::json> RebalanceAutoCommand(const nlohmann::json& args);
  // Every loop turn, between steps: commits a staged layer, publishes the
  // applier's events, runs the auto policy and the after-rebalance measurement.
  void PollRebalance();
  // parallel.cc: TP <-> EP switching, the policy, calibration.
  Result<nlohmann::json> SwitchCommand(const nlohmann::json& args);
  Result<nlohmann::json> PolicyCommand(const nlohmann::json& args);
  Result<nlohmann::json> CalibrateCommand(const nlohmann::json& args);
  // Before TP -> EP: re-homes running requests by Algorithm 4 (engine/
  // scheduler/rehome.h) and moves their state; the figures for the switch
  // event. INTERNAL if the runner refused the copies (a bug).
  Result<nlohmann::json> RehomeForEp();
  // Whether evicting unpinned prefix-cache pages lets `target` hold the KV
  // in use (CacheCovers: for a given per-device overflow). MakeRoomForLayout
  // evicts them if that is enough, else nothing; returns the pages freed.
  bool CacheCanMakeRoom(ParallelMode target) const;
  bool CacheCovers(const std::vector<int>& overflow) const;
  int MakeRoomForLayout(ParallelMode target);
  Result<nlohmann::json> SwitchTo(ParallelMode target, const FaultPlan* fault,
                                  const std::string& why);
  nlohmann::json PolicyJson() const;
  // Once per step, after it and after queueing the requests that arrived
  // during it: feeds the policy and acts on its decision.
  void ObservePolicy();
  // Every loop turn: publishes a finished calibration (and applies it).
  void PollCalibration();
  // Re-reads the live ExpertMap into placement_ (after a committed layer).
  void RefreshPlacement();
  // Per step: MoE critical path (max over devices of expert FFN time, ms).
  void RecordMoeTime(const StepOutput& out);
  double MeanMoeMs(int steps) const;
  int64_t ExpertBytes() const;

  // engine_telemetry.cc: what a step publishes beyond the step itself.
  void PublishAfterStep(const BatchInput& batch, StepOutput* out,
                        const std::vector<Request>& finished, int64_t start_us, int64_t end_us);
  void PublishRequests(bool force);
  void UpdateMetrics(const StepOutput& out, const std::vector<Request>& finished);
  telemetry::RequestDone DoneMessage(const Request& r) const;
  double WindowHitRate(int device) const;

  // engine_security.cc: CURVE refusals and the role check before HandleCommand.
  void SetUpSecurity();
  telemetry::CommandReply HandleAuthorized(const telemetry::CommandRequest& req);
  void PublishRefusals();

  // commands.cc
  telemetry::CommandReply HandleCommand(const telemetry::CommandRequest& req);
  Result<nlohmann::json> Execute(const telemetry::CommandRequest& req);
  nlohmann::json DescribeJson() const;
  nlohmann::json StatusJson() const;

  telemetry::Meta BuildMeta() const;
  // Meta's `backend`: cpu on the wall clock, or the sim's hardware, clock and
  // routing model (so a sim run can be told apart and re-run from its seed).
  nlohmann::json BackendJson() const;
  // Both memory pools of every device, as published on the occupancy stream
  // and shown by the status command.
  std::vector<telemetry::DeviceOccupancy> PoolOccupancy() const;
  void PublishMeta();
  void PublishEvent(std::string kind, std::string name, std::string phase, std::string message,
                    nlohmann::json detail = nlohmann::json::object());
  std::string StateName() const;
  int64_t NowUs() const;

  EngineOptions options_;
  // The serving clock (wall, or virtual under the sim backend); before the
  // runner, which advances a virtual one.
  std::unique_ptr<ServingClock> clock_;
  std::string run_id_;
  int64_t started_unix_ms_ = 0;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<WorkloadGenerator> workload_;
  std::optional<Arrival> next_arrival_;
  int64_t workload_start_us_ = 0;
  std::unique_ptr<telemetry::Publisher> publisher_;
  std::unique_ptr<telemetry::ControlServer> control_;
  std::shared_ptr<telemetry::RefusalLog> refusals_;  // null without CURVE

  TraceLevel trace_level_;
  bool paused_;
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};
  EngineStats stats_;
  int64_t first_step_us_ = -1;
  int64_t last_requests_us_ = -1;
  // Per device, cumulative (hit, query) prefix-cache tokens at each of the
  // last kHitWindow steps: the window hit rate is the difference.
  std::vector<std::deque<std::pair<int64_t, int64_t>>> hit_window_;
  // Routed-token statistics of every step and the placement they land on
  // (absent for a model without routed experts).
  std::optional<eplb::ExpertStats> expert_stats_;
  std::optional<eplb::Placement> placement_;
  std::unique_ptr<eplb::RebalanceApplier> applier_;
  struct RebalanceRun {
    eplb::RebalancePlan plan;
    int64_t start_step = 0;
    double moe_ms_before = 0;      // mean over the steps before Start
    double measured_before = 1.0;  // window balancedness of the steps before Start
    double step_before = 1.0;      // mean per-step balancedness of those steps
    int64_t measure_at_step = -1;  // publish the "measured" event at this step
    bool automatic = false;
  };
  std::optional<RebalanceRun> rebalance_;
  int64_t last_auto_step_ = 0;
  std::deque<double> moe_ms_;  // the last kMoeWindow steps with spans
  // Expert counts summed since the last `experts` message (experts_every_us).
  std::vector<std::vector<int64_t>> pending_counts_;
  int pending_steps_ = 0;
  int64_t last_experts_us_ = 0;
  std::unique_ptr<SwitchPolicy> policy_;
  std::optional<Decision> last_decision_;
  std::unique_ptr<CalibrationRun> calibration_;  // in flight or finished, not yet published
  bool calibration_apply_ = false;

  std::unique_ptr<RequestInbox> inbox_;
  std::unique_ptr<ServingMetrics> metrics_;
  EngineHealth health_;
  std::unordered_map<int64_t, std::shared_ptr<TokenStream>> streams_;
  // Last: stopped (its threads joined) before the inbox and metrics it reads go.
  std::unique_ptr<HttpServer> http_;
};

}  // namespace sy::engine
