// Tests of the simulated-cluster backend inside the real Engine (engine/sim,
// engine/server/sim_flags.h, scenario.h): the same serving loop on a virtual
// clock, telemetry stamped with simulated time, the backend in the run's
// metadata, commands (switch) priced by the cost model, and scenarios
// parsed and run headless to per-phase results.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "engine/server/calibrate_run.h"
#include "engine/server/scenario.h"
#include "engine/server/scenario_results.h"
#include "engine/server/sim_flags.h"
#include "tests/engine/server/engine_fixture.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

// Qwen3-235B-A22B on 8 x H200, priced; a light Poisson load.
EngineOptions SimOptionsFor(const std::string& pub, const std::string& ctl, int max_seq = 4096) {
  EngineOptions o;
  o.runner.devices = 8;
  SimFlags f;
  f.backend = "sim";
  f.hardware = "h200";
  f.max_seq = max_seq;
  const Status st = ApplySimFlags(f, "qwen3-235b-a22b", 7, &o);
  EXPECT_THAT(st, IsOk());
  o.workload.rate = 20;
  o.workload.max_requests = 60;
  o.workload.prompt_len = {LengthDist::Kind::kUniform, 64, 512};
  o.workload.output_len = {LengthDist::Kind::kUniform, 32, 128};
  o.scheduler.max_running = 256;
  o.scheduler.max_batch_tokens = 8192;
  o.publisher.endpoint = pub;
  o.publisher.heartbeat_ms = 50;
  o.control_endpoint = ctl;
  o.run_id = "sim-test";
  return o;
}

// A sim engine started paused and serving on its own thread, with a
// subscriber and a control client. Its destructor stops the engine and waits
// for it, also when a failed ASSERT leaves the test early.
struct PausedSimEngine {
  PausedSimEngine(const std::string& pub, const std::string& ctl, int max_seq = 4096) {
    EngineOptions o = SimOptionsFor(pub, ctl, max_seq);
    o.start_paused = true;
    Result<std::unique_ptr<Engine>> e = Engine::Create(std::move(o));
    if (!e.ok()) {
      error = e.status().ToString();
      return;
    }
    engine = std::move(e).value();
    telemetry::SubscriberOptions so;
    so.endpoint = pub;
    auto s = telemetry::Subscriber::Connect(so);
    auto c = telemetry::ControlClient::Connect(ctl);
    if (!s.ok() || !c.ok()) {
      error = !s.ok() ? s.status().ToString() : c.status().ToString();
      return;
    }
    sub = std::move(s).value();
    client = std::move(c).value();
    run = std::async(std::launch::async, [this] { return engine->Run(); });
  }
  ~PausedSimEngine() {
    if (engine) engine->RequestStop();
    if (run.valid()) run.wait();
  }
  // Stops the engine and returns how its Run ended.
  Status Stop() {
    engine->RequestStop();
    return run.get();
  }

  std::string error;  // empty when all of it started
  std::unique_ptr<Engine> engine;
  std::unique_ptr<telemetry::Subscriber> sub;
  std::unique_ptr<telemetry::ControlClient> client;
  std::future<Status> run;
};

class CountingObserver final : public EngineObserver {
 public:
  void OnStep(const telemetry::Step& s) override {
    ++steps;
    EXPECT_GE(s.start_us, last_end_us) << "steps overlap on the virtual clock";
    EXPECT_GT(s.dur_us, 0);
    last_end_us = s.start_us + s.dur_us;
  }
  void OnRequestDone(const telemetry::RequestDone& d) override {
    ++done;
    EXPECT_GT(d.ttft_us, 0);
    EXPECT_GE(d.e2e_us, d.ttft_us);
  }
  void OnEvent(const telemetry::Event& e) override {
    if (e.name == "switch" && e.phase == "done") ++switches;
  }
  int steps = 0, done = 0, switches = 0;
  int64_t last_end_us = 0;
};

TEST_F(EngineTest, SimBackendServesABoundedWorkloadOnTheVirtualClock) {
  EngineOptions o = SimOptionsFor(pub_, ctl_);
  o.exit_when_done = true;
  CountingObserver obs;
  o.observer = &obs;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  ASSERT_THAT((*engine)->Run(), IsOk());
  EXPECT_EQ(obs.done, 60);
  EXPECT_GT(obs.steps, 60);
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.finished, 60);
  // 60 arrivals at 20/s: about 3 simulated seconds of arrivals (the clock
  // jumped over the idle gaps between them instead of waiting).
  EXPECT_GT(st.clock_us, 1'500'000);
  EXPECT_EQ(st.clock_us, (*engine)->clock_us());
}

TEST_F(EngineTest, SimRunIsMarkedInMetaAndStampedWithSimulatedTime) {
  PausedSimEngine live(pub_, ctl_);
  ASSERT_EQ(live.error, "");
  telemetry::Subscriber* sub = live.sub.get();
  telemetry::ControlClient* client = live.client.get();

  telemetry::Meta meta;
  ASSERT_TRUE(WaitFor(*sub, [&](const telemetry::Message& m) {
    if (auto* x = std::get_if<telemetry::Meta>(&m)) meta = *x;
    return std::holds_alternative<telemetry::Meta>(m);
  }));
  EXPECT_EQ(meta.backend["kind"], "sim");
  EXPECT_EQ(meta.backend["clock"], "virtual");
  EXPECT_EQ(meta.backend["hardware"], "h200");
  EXPECT_EQ(meta.backend["model"], "qwen3-235b-a22b");
  EXPECT_EQ(meta.backend["routing"]["seed"], 7);
  EXPECT_EQ(meta.backend["kernels"], "measured");  // h200.json's measured_kernels
  EXPECT_EQ(meta.backend["collective_latency_us"]["all_to_all"], 60);
  EXPECT_EQ(meta.backend["collective_latency_us"]["allreduce"], 0);
  EXPECT_EQ(meta.devices, 8);
  EXPECT_EQ(meta.model.layers, 94);
  EXPECT_EQ(meta.model.experts, 128);
  EXPECT_EQ(meta.model.dtype, "bf16");  // the priced weights, not the CPU runner's fp32

  // The switch is priced (seed 003 eq. 9-11), not measured on this machine.
  telemetry::CommandReply sw = Call(*client, "switch", {{"to", "tp"}});
  ASSERT_TRUE(sw.ok) << sw.error_message;
  EXPECT_GT(sw.result.value("total_ms", 0.0), 50.0) << sw.result.dump();
  ASSERT_TRUE(Call(*client, "resume").ok);
  int64_t max_t_us = 0;
  int steps = 0;
  ASSERT_TRUE(WaitFor(*sub, [&](const telemetry::Message& m) {
    if (auto* s = std::get_if<telemetry::Step>(&m)) {
      EXPECT_GE(s->env.t_us, s->start_us + s->dur_us) << "stamped on another clock";
      max_t_us = std::max(max_t_us, s->env.t_us);
      ++steps;
    }
    return steps >= 20;
  }));
  ASSERT_THAT(live.Stop(), IsOk());
  // The stamps include the priced switch pause, on the clock the steps use.
  EXPECT_GE(max_t_us, static_cast<int64_t>(sw.result.value("total_ms", 0.0) * 1000));
}

TEST(ScenarioTest, CatalogueScenariosParse) {
  const std::string dir = costmodel::DefaultCatalogDir();
  const std::vector<std::string> names = ScenarioNames(dir);
  for (const char* want : {"moebius-bursty", "moebius-bursty-5x", "moebius-rollout",
                           "deepseek-ep72-decode", "ling-tpu-decode"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) {
    Result<Scenario> s = LoadScenario(dir, n);
    ASSERT_THAT(s, IsOk()) << n;
    for (const std::string& v : s->variants) {
      EXPECT_THAT(ScenarioEngineOptions(*s, v, {}), IsOk()) << n << " " << v;
    }
  }
  Result<Scenario> b = LoadScenario(dir, "moebius-bursty");
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->phases.size(), 5u);
  EXPECT_EQ(b->phases[1].metric, "ttft");
  EXPECT_THAT(LoadScenario(dir, "nope"),
              StatusIs(StatusCode::kNotFound, HasSubstr("moebius-bursty")));
}

TEST(ScenarioTest, BadScenariosAreRefusedWithTheField) {
  const std::string base =
      R"({"hardware": "h200", "model": "qwen3-235b-a22b", "devices": 8, "variants": ["tp"],)";
  auto parse = [&](const std::string& rest) { return ParseScenarioJson(base + rest, "x.json"); };
  EXPECT_THAT(parse(R"("workload": ["--workload", "rollout"]})"), IsOk());
  EXPECT_THAT(ParseScenarioJson("{", "x.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not JSON")));
  EXPECT_THAT(ParseScenarioJson(R"({"hardware": "h200", "model": "m", "variants": ["zz"],
                                   "workload": ["--workload", "rollout"]})",
                                "x.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown variant 'zz'")));
  EXPECT_THAT(parse(R"("workload": ["--workload", "poisson"]})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bounded")));
  EXPECT_THAT(parse(R"("workload": ["--workload", "rollout", "--quiet-s", "3"]})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--quiet-s")));
  EXPECT_THAT(parse(R"("workload": ["--workload", "bursty", "--phases", "3:1,2:5"],
                       "phases": [{"name": "a"}]})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("the workload has 2")));
  EXPECT_THAT(parse(R"("workload": ["--workload", "rollout"], "phases": [{"metric": "fast"}]})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown metric 'fast'")));
  EXPECT_THAT(parse(R"("workload": ["--workload", "rollout"], "devices": "8"})"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(parse(R"("workload": ["--workload", "rollout"], "engine": {"kernels": "fast"}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"kernels\" must be")));
  EXPECT_THAT(parse(R"("workload": ["--workload", "rollout"],
                       "engine": {"all_to_all_latency_us": -5}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("all_to_all_latency_us")));
}

// --sim-kernels and the latency flags: the hardware file's by default, the
// operator's when given (SimFlags, ApplySimFlags).
TEST(SimFlagsTest, KernelsAndLatenciesDefaultToTheHardwareFile) {
  auto apply = [](SimFlags f) {
    EngineOptions o;
    o.runner.devices = 8;
    f.backend = "sim";
    f.hardware = "h200";
    f.max_seq = 4096;
    EXPECT_THAT(ApplySimFlags(f, "qwen3-235b-a22b", 1, &o), IsOk());
    return *o.sim;
  };
  const SimOptions def = apply({});
  EXPECT_FALSE(def.kernels.empty());
  EXPECT_EQ(def.all_to_all_latency_us, def.hardware.all_to_all_latency_us);
  EXPECT_EQ(def.all_to_all_latency_us, 60);
  SimFlags f;
  f.kernels = "flat";
  f.all_to_all_latency_us = 5;
  f.allreduce_latency_us = 7;
  const SimOptions mine = apply(f);
  EXPECT_TRUE(mine.kernels.empty());
  EXPECT_EQ(mine.all_to_all_latency_us, 5);
  EXPECT_EQ(mine.allreduce_latency_us, 7);
  // A scenario's "engine" keys reach the same flags.
  Result<Scenario> s = ParseScenarioJson(
      R"({"hardware": "h200", "model": "qwen3-235b-a22b", "devices": 8, "variants": ["tp"],
          "workload": ["--workload", "rollout"],
          "engine": {"kernels": "flat", "all_to_all_latency_us": 9}})",
      "x.json");
  ASSERT_THAT(s, IsOk());
  Result<EngineOptions> o = ScenarioEngineOptions(*s, "tp", {});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->sim->kernels.empty());
  EXPECT_EQ(o->sim->all_to_all_latency_us, 9);
  EXPECT_EQ(o->sim->allreduce_latency_us, 0);  // the hardware's
}

class DoneCounter final : public EngineObserver {
 public:
  void OnRequestDone(const telemetry::RequestDone&) override { ++done; }
  std::atomic<int> done{0};
};

// EP -> TP when TP holds fewer pages (4 KV heads on 8 devices): finished
// requests' prefixes stay in the prefix cache and fill more than TP holds.
// The switch evicts those unpinned pages first instead of being refused
// (which had kept `auto` in EP for good after a burst).
TEST_F(EngineTest, SwitchToTpEvictsCachedPagesTheLayoutCannotHold) {
  EngineOptions o = SimOptionsFor(pub_, ctl_);
  o.runner.kv_pages_per_device = 200;  // TP: 100 per home
  DoneCounter obs;
  o.observer = &obs;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  // A failed ASSERT returns early: stop the engine so `run` can finish.
  struct StopOnExit {
    Engine* e;
    ~StopOnExit() { e->RequestStop(); }
  } stop{engine->get()};
  for (int i = 0; i < 3000 && obs.done.load() < 60; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(obs.done.load(), 60);
  telemetry::CommandReply st = Call(**client, "status");
  ASSERT_TRUE(st.ok) << st.error_message;
  telemetry::CommandReply sw = Call(**client, "switch", {{"to", "tp"}});
  ASSERT_TRUE(sw.ok) << sw.error_message;
  EXPECT_GT(sw.result.value("evicted_cache_pages", 0), 0) << sw.result.dump();
  EXPECT_EQ(sw.result.value("to", ""), "TP") << sw.result.dump();
  (*engine)->RequestStop();
  EXPECT_THAT(run.get(), IsOk());
}

// `calibrate` under sim prices both layouts on a SimRunner of its own: the
// thresholds are the simulated cluster's (Qwen3-235B on 8 x H200: EP faster
// between 128 and 1024 requests at a 512-token context), and measuring does
// not move the serving engine's virtual clock.
TEST_F(EngineTest, CalibrateOnTheSimPricesTheClusterCrossover) {
  PausedSimEngine live(pub_, ctl_);
  ASSERT_EQ(live.error, "");
  telemetry::Subscriber* sub = live.sub.get();
  telemetry::ControlClient* client = live.client.get();
  Engine* engine = live.engine.get();
  ASSERT_TRUE(Call(*client, "status").ok);  // the loop runs: its clock is set
  // Paused and idle, the engine's virtual clock follows real time; the
  // measurement's own time (16 priced switches alone take ~2.5 s) must not
  // show up on it.
  const int64_t clock_before = engine->clock_us();
  const auto wall_before = std::chrono::steady_clock::now();

  telemetry::CommandReply bad = Call(*client, "calibrate", {{"prompt_len", 5000}});
  EXPECT_EQ(bad.error_code, "INVALID_ARGUMENT");
  EXPECT_THAT(bad.error_message, HasSubstr("prompt_len must be in [1, 4076] (max_seq 4096"));
  // 4096 requests of ~4k tokens: more KV than 8 H200s hold (~2.2M tokens).
  bad = Call(*client, "calibrate", {{"batches", {16, 4096}}, {"prompt_len", 4000}});
  EXPECT_EQ(bad.error_code, "INVALID_ARGUMENT");
  EXPECT_THAT(bad.error_message, HasSubstr("tokens of KV (the largest batch x (prompt_len 4000 + "
                                           "20 decode steps)) exceed the"));
  telemetry::CommandReply cal = Call(*client, "calibrate", {{"apply", true}});
  ASSERT_TRUE(cal.ok) << cal.error_message;
  EXPECT_EQ(cal.result["clock"], "simulated");
  EXPECT_EQ(cal.result["prompt_len"], 512);
  EXPECT_EQ(cal.result["batches"].size(), 8u);
  nlohmann::json done;
  ASSERT_TRUE(WaitFor(*sub, [&](const telemetry::Message& m) {
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e != nullptr && e->kind == "calibrate" && e->phase == "done") done = e->detail;
    return !done.is_null();
  }));
  EXPECT_EQ(done["kind"], "crossover") << done.dump();
  EXPECT_GE(done["lower_batch"].get<int>(), 128) << done["table"].get<std::string>();
  EXPECT_LE(done["upper_batch"].get<int>(), 1024) << done["table"].get<std::string>();
  EXPECT_TRUE(done["applied"].get<bool>());
  // TP is faster for a handful of requests, EP for 2048 (the points' ends).
  const nlohmann::json& pts = done["points"];
  EXPECT_EQ(pts.front()["faster"], "tp");
  EXPECT_EQ(pts.back()["faster"], "ep");
  telemetry::CommandReply policy = Call(*client, "policy");
  ASSERT_TRUE(policy.ok) << policy.error_message;
  EXPECT_EQ(policy.result["t_high"], done["t_high"]);
  const int64_t wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - wall_before)
                              .count();
  EXPECT_LT(engine->clock_us() - clock_before, wall_us + 1'000'000)
      << "calibration moved the serving clock";
  EXPECT_THAT(live.Stop(), IsOk());
}

// With no prompt_len, a sim engine measures 512-token requests, or what its
// max_seq leaves after the decode steps (8 timed steps per layout + 4).
TEST_F(EngineTest, CalibrateDefaultPromptFitsTheEnginesMaxSeq) {
  PausedSimEngine live(pub_, ctl_, 256);
  ASSERT_EQ(live.error, "");
  telemetry::CommandReply cal = Call(*live.client, "calibrate", {{"batches", {16, 64}}});
  ASSERT_TRUE(cal.ok) << cal.error_message;
  EXPECT_EQ(cal.result["prompt_len"], 256 - 20);
  EXPECT_THAT(live.Stop(), IsOk());
}

// The measurement itself: deterministic on the virtual clock, and at a
// 2048-token context it brackets the crossover docs/SIMULATION.md's table
// gives (TP faster at 128 requests, EP at 256; seed 003: 128-256).
TEST(CalibrateSimTest, MeasureLayoutsIsDeterministicAndBracketsTheCrossover) {
  EngineOptions o = SimOptionsFor("inproc://unused-pub", "inproc://unused-ctl");
  const CalibrateRunOptions c{.batches = {64, 128, 256, 512}, .steps = 4, .prompt_len = 2048};
  Result<std::vector<LatencyPoint>> a =
      MeasureLayouts(SimLayoutBench(o.model, *o.sim), o.model, o.runner, c);
  ASSERT_THAT(a.status(), IsOk());
  Result<std::vector<LatencyPoint>> b =
      MeasureLayouts(SimLayoutBench(o.model, *o.sim), o.model, o.runner, c);
  ASSERT_THAT(b.status(), IsOk());
  ASSERT_EQ(a->size(), 4u);
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].tp_ms, (*b)[i].tp_ms);
    EXPECT_EQ((*a)[i].ep_ms, (*b)[i].ep_ms);
  }
  Result<Calibration> fit = FitCrossover(*a);
  ASSERT_THAT(fit.status(), IsOk());
  EXPECT_EQ(fit->kind, CrossoverKind::kCrossover) << FormatCalibrationTable(*fit);
  EXPECT_EQ(fit->lower_batch, 128) << FormatCalibrationTable(*fit);
  EXPECT_EQ(fit->upper_batch, 256) << FormatCalibrationTable(*fit);
}

// A twentieth of moebius-bursty, every variant: the structure of the results
// (phases, requests all accounted for, the auto policy switching at the
// bursts). The seed's full-size shape is checked in Release by
// tests/integration/scenario_shape_test.py.
TEST(ScenarioTest, ShortBurstyRunGivesPerPhaseResultsForEveryVariant) {
  Result<Scenario> s = LoadScenario(costmodel::DefaultCatalogDir(), "moebius-bursty");
  ASSERT_THAT(s, IsOk());
  ScenarioRunOptions run;
  run.time_scale = 0.05;
  std::vector<VariantResult> results;
  for (const std::string& v : s->variants) {
    Result<VariantResult> r = RunScenarioVariant(*s, v, run);
    ASSERT_THAT(r, IsOk()) << v;
    results.push_back(*r);
  }
  ASSERT_EQ(results.size(), 3u);
  for (const VariantResult& r : results) {
    ASSERT_EQ(r.phases.size(), 5u);
    int64_t in_phases = 0;
    for (const PhaseResult& p : r.phases) in_phases += p.requests;
    EXPECT_EQ(in_phases, r.requests) << r.variant;
    EXPECT_GT(r.requests, 80) << r.variant;
    EXPECT_GT(r.phases[1].requests, 10) << r.variant;  // the 80 req/s burst, 0.35 s
    EXPECT_GT(r.sim_s, 15.0) << r.variant;
    EXPECT_GT(r.balancedness, 0.0) << r.variant;
  }
  EXPECT_EQ(results[0].switches, 0);  // static TP
  EXPECT_EQ(results[1].switches, 0);  // static EP
  const std::string table = FormatScenarioTable(*s, results);
  EXPECT_THAT(table, HasSubstr("phase 2 burst-80"));
  EXPECT_THAT(table, HasSubstr("best static"));
  EXPECT_EQ(AutoVsBestStatic(results).size(), 5u);
  // Pooled as the seed reports the trace: the three quiet phases, the two bursts.
  EXPECT_THAT(table, HasSubstr("pooled: every tpot phase (quiet)"));
  EXPECT_THAT(table, HasSubstr("pooled: every ttft phase (burst-80+burst-120)"));
  EXPECT_EQ(AutoVsBestStatic(results, /*pooled=*/true).size(), 2u);
  for (const VariantResult& r : results) {
    ASSERT_EQ(r.pooled.size(), 2u) << r.variant;
    EXPECT_EQ(r.pooled[0].requests,
              r.phases[0].requests + r.phases[2].requests + r.phases[4].requests);
    EXPECT_EQ(r.pooled[1].requests, r.phases[1].requests + r.phases[3].requests);
  }
}

// One burst well past T_h: auto switches to EP in it and back to TP after
// it, and the results date each switch within its phase.
TEST(ScenarioTest, AutoSwitchesAreDatedInTheResults) {
  Result<Scenario> s = LoadScenario(costmodel::DefaultCatalogDir(), "moebius-bursty");
  ASSERT_THAT(s, IsOk());
  s->workload_args = {"--workload",   "bursty", "--phases",     "3:5,3:300,12:2",
                      "--prompt-len", "128",    "--output-len", "128"};
  s->phases = {{"quiet", "tpot"}, {"burst", "ttft"}, {"after", "tpot"}};
  Result<VariantResult> r = RunScenarioVariant(*s, "auto", {});
  ASSERT_THAT(r, IsOk());
  ASSERT_GE(r->switches, 2);
  ASSERT_EQ(r->switch_log.size(), static_cast<size_t>(r->switches));
  const SwitchPoint& in = r->switch_log[0];
  EXPECT_EQ(in.from, "TP");
  EXPECT_EQ(in.to, "EP");
  EXPECT_GT(in.at_s, 3.0);  // in the burst, [3 s, 6 s)
  EXPECT_LT(in.at_s, 6.0);
  const SwitchPoint& out = r->switch_log[1];
  EXPECT_EQ(out.from, "EP");
  EXPECT_EQ(out.to, "TP");
  EXPECT_GT(out.at_s, in.at_s);
  EXPECT_LE(r->switch_log.back().at_s, r->sim_s);
  EXPECT_THAT(FormatScenarioTable(*s, {*r}), HasSubstr("auto switched: TP->EP at "));
  EXPECT_THAT(FormatScenarioTable(*s, {*r}), HasSubstr("auto policy: T_h 256, T_l 204.8\n"));
  // LoadScenario leaves the latencies to the hardware ("the hardware's");
  // the CLI names the values it resolved (scenario_cli.cc).
  EXPECT_THAT(FormatScenarioTable(*s, {*r}),
              HasSubstr("sim: kernels measured, collective latency: all-reduce the hardware's, "
                        "all-to-all the hardware's\n"));

  // The scenario's T_h is the policy's (`scenario --t-high` sets it): above
  // any step's batch (the step budget is 16,384 tokens, prompt chunks
  // included), auto stays in TP.
  s->t_high = 20000;
  r = RunScenarioVariant(*s, "auto", {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->switches, 0);
  EXPECT_THAT(FormatScenarioTable(*s, {*r}), HasSubstr("auto policy: T_h 20000, T_l 16000.0\n"));
}

// Seed 000's benchmark configuration: Ling-2.6-1T on 16 v7x chips = 32
// devices, experts EP 32, attention TP 4 in 8 data-parallel groups, fp8.
// With data-parallel attention (replicated attention weights) the weights
// do not fit a v7x device; with the seed's attention TP 4 they do. A short
// version (fewer, shorter requests) runs through the whole engine.
TEST(ScenarioTest, LingTpuDecodeRunsTheSeedConfiguration) {
  Result<Scenario> s = LoadScenario(costmodel::DefaultCatalogDir(), "ling-tpu-decode");
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->hardware, "tpu-v7x");
  EXPECT_EQ(s->devices, 32);
  EXPECT_EQ(s->attention_tp, 4);
  EXPECT_EQ(s->dtype, "fp8");
  Result<EngineOptions> o = ScenarioEngineOptions(*s, "ep", {});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->sim->attention_tp, 4);
  EXPECT_GT(o->runner.kv_pages_per_device, 1000);
  Scenario replicated = *s;
  replicated.attention_tp = 1;
  EXPECT_THAT(ScenarioEngineOptions(replicated, "ep", {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("GB of weights")));

  Scenario small = *s;
  small.workload_args = {"--workload",   "rollout", "--rollout-size", "64",
                         "--prompt-len", "2048",    "--output-len",   "16"};
  small.max_running = 32;
  Result<VariantResult> r = RunScenarioVariant(small, "ep", {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->requests, 64);
  ASSERT_EQ(r->phases.size(), 1u);
  EXPECT_EQ(r->phases[0].requests, 64);
  EXPECT_GT(r->phases[0].output_tok_s, 0);
  EXPECT_EQ(r->phases[0].running_max, 32);  // max_running binds, not KV
  EXPECT_GT(r->phases[0].waiting_max, 0);
  EXPECT_THAT(FormatScenarioTable(small, {*r}), HasSubstr("ling-2.6-1t on 32 x tpu-v7x"));
}

}  // namespace
}  // namespace sy::engine
