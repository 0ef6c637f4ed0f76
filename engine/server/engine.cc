// File: engine/server/engine.cc
//
// The loop and the publishing side of the Engine; command handlers live in
// commands.cc.
#include "engine/server/engine.h"

#include "engine/server/security_flags.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <utility>

namespace sy::engine {
namespace {

using Clock = SpanRecorder::Clock;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string NewRunId(int64_t unix_ms) {
  std::ostringstream os;
  os << "run-" << std::hex << unix_ms << "-" << (std::random_device{}() & 0xffff);
  return os.str();
}

}  // namespace

Engine::Engine(EngineOptions options)
    : options_(std::move(options)),
      trace_level_(options_.trace_level),
      paused_(options_.start_paused) {}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options) {
  RETURN_IF_ERROR(options.model.Validate().WithContext("model"));
  options.scheduler.max_seq = options.model.max_seq;
  options.scheduler.vocab = options.model.vocab;
  options.scheduler.eos_token = options.model.eos_token;
  RETURN_IF_ERROR(options.scheduler.Validate().WithContext("scheduler"));
  if (options.workload_enabled) {
    options.workload.max_prompt_tokens =
        std::min(options.workload.max_prompt_tokens, options.model.max_seq - 1);
    RETURN_IF_ERROR(options.workload.Validate().WithContext("workload"));
  }
  if (options.idle_wait_ms < 1) return InvalidArgument("idle_wait_ms must be >= 1");
  if (options.sim && !(options.sim_speed >= 0 && std::isfinite(options.sim_speed))) {
    return InvalidArgument("sim speed must be >= 0 (0: as fast as possible), got " +
                           std::to_string(options.sim_speed));
  }
  if (options.max_queue < 1) return InvalidArgument("max_queue must be >= 1");
  RETURN_IF_ERROR(CheckEndpointSecurity(options.publisher.endpoint, options.control_endpoint,
                                        options.curve.has_value()));

  std::unique_ptr<Engine> e(new Engine(std::move(options)));
  const EngineOptions& o = e->options_;
  e->started_unix_ms_ = UnixMs();
  e->run_id_ = o.run_id.empty() ? NewRunId(e->started_unix_ms_) : o.run_id;
  if (o.redundant_experts != 0 && o.model.experts > 0) {
    ASSIGN_OR_RETURN(e->options_.runner.expert_phy2log,
                     eplb::InitialPlacement(o.model.layers, o.model.experts, o.runner.devices,
                                            o.redundant_experts));
  }
  if (o.sim) {
    auto clock = std::make_unique<VirtualClock>(o.sim_speed);
    SimOptions sim = *o.sim;
    sim.clock = clock.get();
    e->clock_ = std::move(clock);
    ASSIGN_OR_RETURN(e->runner_, CreateSimRunner(o.model, o.runner, sim));
  } else {
    ASSIGN_OR_RETURN(e->runner_, ModelRunner::Create(o.model, o.runner));
    e->clock_ = std::make_unique<WallClock>(e->runner_->epoch());
  }
  std::vector<KvPool*> pools;
  std::vector<StatePool*> state_pools;
  for (int d = 0; d < e->runner_->devices(); ++d) {
    pools.push_back(&e->runner_->kv_pool(d));
    state_pools.push_back(&e->runner_->state_pool(d));
  }
  e->scheduler_ =
      std::make_unique<Scheduler>(o.scheduler, std::move(pools), std::move(state_pools));
  if (o.workload_enabled) e->workload_ = std::make_unique<WorkloadGenerator>(o.workload);
  e->SetUpSecurity();  // before the sockets: fills o.publisher.curve
  telemetry::PublisherOptions publisher = o.publisher;
  if (e->clock_->is_virtual()) {
    publisher.now_us = [clock = e->clock_.get()] { return clock->NowUs(); };
  }
  ASSIGN_OR_RETURN(e->publisher_,
                   telemetry::Publisher::Start(publisher, e->run_id_, e->runner_->epoch()));
  ASSIGN_OR_RETURN(e->control_, telemetry::ControlServer::Bind(
                                    {.endpoint = o.control_endpoint, .curve = o.curve}));
  e->hit_window_.resize(e->runner_->devices());
  if (o.model.experts > 0) {
    ASSIGN_OR_RETURN(eplb::ExpertStats stats,
                     eplb::ExpertStats::Create(o.model.layers, o.model.experts));
    ASSIGN_OR_RETURN(eplb::Placement placement, eplb::PlacementOf(e->runner_->expert_map()));
    e->expert_stats_.emplace(std::move(stats));
    e->placement_.emplace(std::move(placement));
    e->applier_ = std::make_unique<eplb::RebalanceApplier>(e->runner_.get());
  }
  if (o.initial_layout != e->runner_->parallel_mode()) {
    Result<SwitchStats> st = e->runner_->SwitchParallelism(o.initial_layout);
    if (!st.ok()) return st.status().WithContext("initial layout");
  }
  ASSIGN_OR_RETURN(SwitchPolicy policy, SwitchPolicy::Create(o.policy));
  e->policy_ = std::make_unique<SwitchPolicy>(std::move(policy));
  e->inbox_ = std::make_unique<RequestInbox>(o.max_queue);
  e->metrics_ = std::make_unique<ServingMetrics>(o.model.name);
  e->health_.last_turn_us.store(SteadyMicros());
  if (o.http_enabled) {
    HttpServerOptions http = o.http;
    http.model_name = o.model.name;
    http.max_seq = o.model.max_seq;
    http.vocab = o.model.vocab;
    std::shared_ptr<const Tokenizer> tok = o.tokenizer;
    if (!tok) tok = MakeByteTokenizer();
    ASSIGN_OR_RETURN(e->http_, HttpServer::Start(http, e->inbox_.get(), e->metrics_.get(),
                                                 &e->health_, std::move(tok)));
  }
  return e;
}

int Engine::http_port() const { return http_ ? http_->port() : 0; }

int64_t Engine::NowUs() const { return clock_->NowUs(); }

std::string Engine::StateName() const {
  if (stopping_) return "stopping";
  return paused_ ? "paused" : "running";
}

telemetry::Meta Engine::BuildMeta() const {
  const ModelConfig& c = options_.model;
  telemetry::Meta m;
  m.model = {.preset = c.name,
             .vocab = c.vocab,
             .hidden = c.hidden,
             .layers = c.layers,
             .heads = c.heads,
             .head_dim = c.head_dim,
             .experts = c.experts,
             .top_k = c.top_k,
             .expert_inter = c.expert_inter,
             .shared_inter = c.shared_inter,
             .max_seq = c.max_seq,
             .page_size = options_.runner.page_size,
             .params = c.ParamCount(),
             // The CPU runner computes in fp32; a sim prices the weights it names.
             .dtype = options_.sim ? std::string(costmodel::DtypeName(options_.sim->weight_dtype))
                                   : "fp32",
             .arch = c.arch,
             .attention = {}};
  for (int l = 0; l < c.layers; ++l) {
    m.model.attention.emplace_back(AttentionKindName(c.attention(l)));
  }
  m.devices = runner_->devices();
  m.layout = std::string(ParallelModeName(runner_->parallel_mode()));
  m.policy = PolicyJson();
  m.trace_level = std::string(TraceLevelName(trace_level_));
  m.paused = paused_;
  m.started_unix_ms = started_unix_ms_;
  m.workload = options_.workload_enabled ? options_.workload.Describe() : "none";
  m.expert_device = runner_->expert_device();
  m.kv_pages_per_device = runner_->kv_pool(0).num_pages();
  m.state_slots_per_device = runner_->state_pool(0).slots();
  m.backend = BackendJson();
  return m;
}

nlohmann::json Engine::BackendJson() const {
  if (!options_.sim) return {{"kind", "cpu"}, {"clock", "wall"}};
  const SimOptions& sim = *options_.sim;
  return {{"kind", "sim"},
          {"clock", "virtual"},
          {"speed", options_.sim_speed},
          {"hardware", sim.hardware.name},
          {"model", sim.model.name},
          {"dtype", costmodel::DtypeName(sim.compute_dtype)},
          {"weight_dtype", costmodel::DtypeName(sim.weight_dtype)},
          {"efficiency",
           {{"compute", sim.efficiency.compute},
            {"hbm", sim.efficiency.hbm},
            {"link", sim.efficiency.link}}},
          {"kernels", sim.kernels.empty() ? "flat" : "measured"},
          {"collective_latency_us",
           {{"allreduce", sim.allreduce_latency_us}, {"all_to_all", sim.all_to_all_latency_us}}},
          {"overlap", sim.overlap == costmodel::Overlap::kSerial ? "serial" : "hide-comm"},
          {"routing",
           {{"skew", sim.routing.skew},
            {"drift_period_s", sim.routing.drift_period_s},
            {"drift_fraction", sim.routing.drift_fraction},
            {"seed", sim.routing.seed}}}};
}

void Engine::PublishMeta() { publisher_->SetMeta(BuildMeta()); }

void Engine::PublishEvent(std::string kind, std::string name, std::string phase,
                          std::string message, nlohmann::json detail) {
  telemetry::Event ev;
  ev.kind = std::move(kind);
  ev.name = std::move(name);
  ev.phase = std::move(phase);
  ev.message = std::move(message);
  ev.detail = std::move(detail);
  if (options_.observer) options_.observer->OnEvent(ev);
  publisher_->Publish(std::move(ev));
}

void Engine::AdmitArrivals() {
  if (!workload_) return;
  const int64_t now = NowUs();
  while (next_arrival_ && workload_start_us_ + next_arrival_->time_us <= now) {
    // The scheduled time, not the time we got to it: a lagging loop shows up
    // as queueing delay in TTFT, as an open-loop client would see it.
    const int64_t arrival_us = workload_start_us_ + next_arrival_->time_us;
    Result<int64_t> id = scheduler_->Submit(std::move(next_arrival_->spec), arrival_us);
    if (!id.ok()) {
      ++stats_.rejected;
      spdlog::warn("workload request rejected: {}", id.status().ToString());
      PublishEvent("warning", "rejected", "", id.status().ToString());
    }
    next_arrival_ = workload_->Next();
  }
}

std::chrono::milliseconds Engine::IdleWait() {
  // Paused, a virtual clock must not run to the next arrival: nothing would
  // be served in between, and the operator expects time to stand still.
  const bool scheduled = next_arrival_ && !stopping_ && !paused_;
  const int64_t until_us = scheduled ? workload_start_us_ + next_arrival_->time_us : -1;
  return std::chrono::milliseconds(clock_->IdleWaitMs(until_us, options_.idle_wait_ms));
}

Status Engine::Run() {
  const auto handler = [this](const telemetry::CommandRequest& r) { return HandleAuthorized(r); };
  workload_start_us_ = NowUs();
  if (workload_) next_arrival_ = workload_->Next();
  PublishMeta();
  publisher_->SetState(StateName(), scheduler_->step());
  PublishEvent("lifecycle", "start", "", "engine started",
               {{"run", run_id_}, {"workload", BuildMeta().workload}});
  spdlog::info("engine {} serving: model={} devices={} trace={} workload='{}'{}", run_id_,
               options_.model.name, runner_->devices(), TraceLevelName(trace_level_),
               BuildMeta().workload, paused_ ? " (paused)" : "");
  if (http_)
    spdlog::info("OpenAI-compatible API on http://{}:{}/v1", options_.http.host, http_->port());

  Status result;
  while (true) {
    health_.last_turn_us.store(SteadyMicros());
    control_->Serve(handler);
    PollRebalance();
    PollCalibration();
    PublishRefusals();
    if (stop_requested_.load() && !stopping_) {
      stopping_ = true;
      spdlog::info("stop requested");
    }
    if (stopping_) break;
    AdmitArrivals();
    AdmitApiRequests();
    CancelAbandoned();
    if (!paused_ && !scheduler_->idle()) {
      result = RunStep();
      if (!result.ok()) break;
      if (scheduler_->last_plan().batch_requests > 0) continue;
    } else if (options_.exit_when_done && WorkloadExhausted() && scheduler_->idle()) {
      spdlog::info("workload done: {} requests finished", scheduler_->finished_total());
      break;
    }
    control_->ServeFor(handler, IdleWait());
  }

  stopping_ = true;
  health_.stopping.store(true);
  EndStreams(Unavailable("the engine is stopping"));
  publisher_->SetState(StateName(), scheduler_->step());
  PublishEvent("lifecycle", "stop", "", result.ok() ? "engine stopped" : result.ToString(),
               {{"steps", scheduler_->step()},
                {"finished", scheduler_->finished_total()},
                {"generated", scheduler_->generated_total()}});
  spdlog::info(
      "engine {} stopped after {} steps, {} requests finished, {} tokens generated, "
      "{:.1f} s on the {} clock",
      run_id_, scheduler_->step(), scheduler_->finished_total(), scheduler_->generated_total(),
      static_cast<double>(NowUs()) / 1e6, clock_->is_virtual() ? "virtual" : "wall");
  return result;
}

Status Engine::RunStep() {
  const int64_t start_us = NowUs();
  scheduler_->set_prefill_group(runner_->prefill_group());  // the layout may have switched
  BatchInput batch = scheduler_->Plan();
  if (batch.seqs.empty()) return Status::Ok();  // nothing admissible yet
  Result<StepOutput> out = runner_->Step(batch, trace_level_);
  if (!out.ok())
    return Internal("model step " + std::to_string(batch.step) +
                    " failed: " + out.status().ToString());
  const int64_t end_us = NowUs();
  ASSIGN_OR_RETURN(std::vector<Request> finished, scheduler_->Commit(*out, end_us));
  FeedStreams(batch, *out, finished);
  PublishAfterStep(batch, &*out, finished, start_us, end_us);
  UpdateMetrics(*out, finished);
  // Queue what arrived during the step before anything reads the load: the
  // switch policy then sees a burst before the old layout prefills it.
  AdmitArrivals();
  AdmitApiRequests();
  if (options_.model.experts > 0) ObservePolicy();

  const int64_t done_us = NowUs();
  if (first_step_us_ < 0) first_step_us_ = start_us;
  stats_.step_us += done_us - start_us;
  stats_.serving_us = done_us - first_step_us_;
  stats_.clock_us = done_us;
  return Status::Ok();
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.steps = scheduler_->step();
  s.finished = scheduler_->finished_total();
  s.generated = scheduler_->generated_total();
  s.dropped = publisher_->counters().dropped_total;
  s.preempted = scheduler_->preempted_total();
  s.cancelled = scheduler_->cancelled_total();
  return s;
}

}  // namespace sy::engine
