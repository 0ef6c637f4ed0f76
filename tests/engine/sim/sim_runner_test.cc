// SimRunner steps (engine/sim/sim_runner.h): the simulated duration against
// the cost model, imbalance and stragglers, the seed 003 TP/EP crossover,
// span levels, validation parity with the CPU runner, configs and pool sizes,
// and the CPU cost of a step (printed, not asserted).
#include "engine/sim/sim_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <utility>

#include "base/status_matchers.h"
#include "engine/costmodel/cost_model.h"
#include "tests/engine/sim/sim_test_util.h"

namespace sy::engine {
namespace {

using costmodel::Phase;
using ::testing::HasSubstr;

SimRig Qwen(double skew, double overhead_us = 0) {
  return MakeRig("h200", "qwen3-235b-a22b", 8, [&](SimOptions& s) {
    s.routing.skew = skew;
    s.step_overhead_us = overhead_us;
  });
}

// Uniform routing (skew 0) prices each device's kernels as EstimateStep
// prices the balanced shape; the difference is the multinomial noise of the
// sampled counts (the busiest device's rows exceed the mean), so the sim is
// never faster and at most 6% slower here.
TEST(SimRunnerTest, UniformStepMatchesEstimateStep) {
  struct Case {
    Phase phase;
    int seqs, new_tokens, context;
  };
  for (bool tp : {false, true}) {
    for (const Case& c : {Case{Phase::kDecode, 256, 1, 4096}, Case{Phase::kDecode, 1024, 1, 1024},
                          Case{Phase::kPrefill, 8, 2048, 0}, Case{Phase::kPrefill, 8, 8192, 0}}) {
      SimRig rig = Qwen(0.0);
      if (tp) ToTp(rig);
      const double sim = MeanStepMs(rig, Batch(c.seqs, 8, c.new_tokens, c.context));
      const int tokens = c.seqs * c.new_tokens;
      // EP = {ep = P, tp = 1}, TP = {ep = 1, tp = P}.
      const double est =
          EstimateMs(rig.sim, c.phase, tokens, c.phase == Phase::kDecode ? c.context : c.new_tokens,
                     tp ? 1 : 8, tp ? 8 : 1, 8);
      std::printf("%s %s tokens %d context %d: sim %.3f ms, EstimateStep %.3f ms (%+.2f%%)\n",
                  tp ? "TP" : "EP", c.phase == Phase::kDecode ? "decode " : "prefill", tokens,
                  c.context, sim, est, 100 * (sim / est - 1));
      EXPECT_GE(sim, est * 0.995);
      EXPECT_LE(sim, est * 1.06);
    }
  }
}

TEST(SimRunnerTest, ImbalanceRaisesTheStepTimeUnderEpOnly) {
  const BatchInput batch = Batch(512, 8, 1, 2048);
  SimRig flat = Qwen(0.0), skewed = Qwen(1.2);
  const double flat_ms = MeanStepMs(flat, batch), skewed_ms = MeanStepMs(skewed, batch);
  std::printf("EP decode 512: uniform %.3f ms, skew 1.2 %.3f ms\n", flat_ms, skewed_ms);
  EXPECT_GT(skewed_ms, flat_ms * 1.05);
  // TP: every device computes 1/P of every row, so skew changes little.
  SimRig flat_tp = Qwen(0.0), skewed_tp = Qwen(1.2);
  ToTp(flat_tp);
  ToTp(skewed_tp);
  const double a = MeanStepMs(flat_tp, batch), b = MeanStepMs(skewed_tp, batch);
  std::printf("TP decode 512: uniform %.3f ms, skew 1.2 %.3f ms\n", a, b);
  EXPECT_NEAR(b, a, 0.02 * a);
}

// The straggler: a collective starts when the slowest device arrives, so
// under skew some device idles before each combine (kFull spans show it).
TEST(SimRunnerTest, CollectivesWaitForTheSlowestDevice) {
  SimRig rig = Qwen(1.5);
  Result<StepOutput> out = rig.runner->Step(Batch(512, 8, 1, 2048), TraceLevel::kFull);
  ASSERT_THAT(out.status(), IsOk());
  std::map<std::pair<int, int>, int64_t> expert_end, combine_start;
  for (const telemetry::Span& s : out->spans) {
    if (s.name == "expert_ffn") expert_end[{s.layer, s.device}] = s.start_us + s.dur_us;
    if (s.name == "combine") combine_start[{s.layer, s.device}] = s.start_us;
  }
  ASSERT_FALSE(combine_start.empty());
  int64_t idle = 0;
  for (const auto& [key, start] : combine_start) {
    EXPECT_EQ(start, combine_start.at({key.first, 0})) << "layer " << key.first;
    ASSERT_TRUE(expert_end.count(key));
    EXPECT_GE(start, expert_end.at(key));
    idle += start - expert_end.at(key);
  }
  EXPECT_GT(idle, 0);
}

// Seed 003: on 8xH200, TP wins at small batch (EP's data-parallel attention
// reads the whole attention weights on every device), EP at large batch
// (TP all-reduces every token twice per layer and duplicates KV heads).
TEST(SimRunnerTest, Qwen3TpBeatsEpAtSmallBatchAndEpWinsAtLargeBatch) {
  std::printf("Qwen3-235B-A22B on 8xH200, decode at context 2048, skew 1.0, bf16:\n");
  std::printf("  batch    TP ms    EP ms\n");
  std::map<int, std::pair<double, double>> ms;
  for (int batch : {8, 64, 128, 256, 512, 1024}) {
    SimRig ep = Qwen(1.0, 200), tp = Qwen(1.0, 200);
    ToTp(tp);
    const BatchInput b = Batch(batch, 8, 1, 2048);
    ms[batch] = {MeanStepMs(tp, b), MeanStepMs(ep, b)};
    std::printf("  %5d  %7.3f  %7.3f\n", batch, ms[batch].first, ms[batch].second);
  }
  EXPECT_LT(ms[8].first, ms[8].second);
  EXPECT_LT(ms[64].first, ms[64].second);
  EXPECT_GT(ms[1024].first, ms[1024].second);
}

TEST(SimRunnerTest, SummarySpansSumTheFullSpans) {
  SimRig full = Qwen(1.0), summary = Qwen(1.0), off = Qwen(1.0);
  const BatchInput b = Batch(96, 8, 1, 1000);
  Result<StepOutput> f = full.runner->Step(b, TraceLevel::kFull);
  Result<StepOutput> s = summary.runner->Step(b, TraceLevel::kSummary);
  Result<StepOutput> o = off.runner->Step(b, TraceLevel::kOff);
  ASSERT_THAT(f.status(), IsOk());
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_THAT(o.status(), IsOk());
  EXPECT_EQ(full.now(), summary.now());
  EXPECT_EQ(full.now(), off.now());
  EXPECT_TRUE(o->spans.empty());
  std::map<std::pair<int, std::string>, std::pair<int64_t, int64_t>> sums;  // dur, flops
  for (const telemetry::Span& x : f->spans) {
    auto& [dur, flops] = sums[std::make_pair(x.device, x.name)];
    dur += x.dur_us;
    flops += x.flops;
  }
  ASSERT_EQ(s->spans.size(), sums.size());
  for (const telemetry::Span& x : s->spans) {
    EXPECT_EQ(x.layer, -1);
    const auto key = std::make_pair(x.device, x.name);
    ASSERT_TRUE(sums.count(key)) << x.name;
    EXPECT_EQ(x.dur_us, sums[key].first) << x.device << " " << x.name;
    EXPECT_NEAR(double(x.flops), double(sums[key].second), 1e-6 * x.flops + 100);
  }
  // Same routing, same counts.
  EXPECT_EQ(f->expert_counts, s->expert_counts);
  EXPECT_GT(f->comm_bytes, 0);
  EXPECT_EQ(f->comm_bytes, o->comm_bytes);
}

TEST(SimRunnerTest, OutputsAreNeverEosAndDeterministic) {
  SimRig a = Qwen(1.0), b = Qwen(1.0);
  BatchInput batch = Batch(16, 8, 3, 10);
  batch.seqs[0].sample = false;
  Result<StepOutput> x = a.runner->Step(batch, TraceLevel::kOff);
  Result<StepOutput> y = b.runner->Step(batch, TraceLevel::kOff);
  ASSERT_THAT(x.status(), IsOk());
  ASSERT_THAT(y.status(), IsOk());
  EXPECT_EQ(x->outputs[0].next_token, -1);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    EXPECT_EQ(x->outputs[i].request_id, batch.seqs[i].request_id);
    EXPECT_EQ(x->outputs[i].next_token, y->outputs[i].next_token);
    EXPECT_NE(x->outputs[i].next_token, a.runner->config().eos_token);
    EXPECT_LT(x->outputs[i].next_token, a.runner->config().vocab);
  }
  ASSERT_EQ(x->expert_counts.size(), 94u);
  for (const auto& row : x->expert_counts) {
    int64_t sum = 0;
    for (int64_t c : row) sum += c;
    EXPECT_EQ(sum, 48 * 8);
  }
  EXPECT_THAT(a.runner->Logits(batch).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("computes no logits")));
  EXPECT_EQ(a.runner->expert_buffer(0), nullptr);
}

TEST(SimRunnerTest, HybridAndDenseLayersArePriced) {
  // DeepSeek-V3 (MLA, 3 dense layers, a shared expert) and Ling3-Tiny (KDA).
  SimRig ds = MakeRig("h200", "deepseek-v3", 8);
  SimRig ling = MakeRig("h100", "ling3-tiny", 4);
  ASSERT_NE(ds.runner, nullptr);
  ASSERT_NE(ling.runner, nullptr);
  for (SimRig* rig : {&ds, &ling}) {
    Result<StepOutput> out =
        rig->runner->Step(Batch(64, rig->runner->devices(), 1, 512), TraceLevel::kSummary);
    ASSERT_THAT(out.status(), IsOk());
    std::map<std::string, int64_t> by_name;
    for (const telemetry::Span& s : out->spans) by_name[s.name] += s.dur_us;
    EXPECT_GT(rig->now(), 0);
    EXPECT_GT(by_name["attention_mla"], 0);
    EXPECT_GT(by_name["shared_expert"], 0);
    EXPECT_GT(by_name["dense_ffn"], 0);
    EXPECT_GT(by_name["expert_ffn"], 0);
  }
  EXPECT_EQ(ds.runner->expert_map().first_moe(), 3);
}

// The same bad batches, the same refusals as the CPU runner (both run
// ValidateBatch, runner_checks.h), and the clock does not move.
TEST(SimRunnerTest, RefusesBadBatchesWithTheCpuRunnersMessages) {
  const costmodel::ModelSpec spec = TinySpec(4, 16, 2, 1);
  Result<ModelConfig> config = SimModelConfig(spec, 64);
  ASSERT_THAT(config.status(), IsOk());
  const ModelRunnerOptions o{.devices = 2, .kv_pages_per_device = 8, .page_size = 4};
  Result<std::unique_ptr<ModelRunner>> cpu = ModelRunner::Create(*config, o);
  ASSERT_THAT(cpu.status(), IsOk());
  VirtualClock clock(0);
  SimOptions sim{.hardware = Hw("h100"), .model = spec, .clock = &clock};
  Result<std::unique_ptr<ModelRunner>> simr = CreateSimRunner(*config, o, sim);
  ASSERT_THAT(simr.status(), IsOk());
  auto good = [] {
    BatchInput b;
    b.seqs.push_back({.request_id = 1, .device = 0, .tokens = {5, 6}, .pages = {0}});
    b.seqs.push_back(
        {.request_id = 2, .device = 1, .tokens = {5}, .start_pos = 4, .pages = {0, 1}});
    return b;
  };
  std::vector<BatchInput> bad(9, good());
  bad[0].seqs[1].device = 2;
  bad[1].seqs[0].tokens.clear();
  bad[2].seqs[0].start_pos = -1;
  bad[3].seqs[1].start_pos = 64;
  bad[4].seqs[0].tokens[1] = 300;
  bad[5].seqs[1].pages = {0};
  bad[6].seqs[1].pages = {0, 8};
  bad[7].seqs[1].request_id = 1;
  bad[8].seqs[0].temperature = -1;
  for (size_t i = 0; i < bad.size(); ++i) {
    Result<StepOutput> want = (*cpu)->Step(bad[i], TraceLevel::kOff);
    Result<StepOutput> got = (*simr)->Step(bad[i], TraceLevel::kOff);
    ASSERT_FALSE(want.ok()) << i;
    EXPECT_THAT(got.status(), StatusIs(StatusCode::kInvalidArgument)) << i;
    EXPECT_EQ(got.status().message(), want.status().message()) << i;
  }
  EXPECT_EQ(clock.NowUs(), 0);  // nothing ran
  EXPECT_THAT((*simr)->Step(good(), TraceLevel::kOff).status(), IsOk());
  EXPECT_GT(clock.NowUs(), 0);
}

TEST(SimRunnerTest, CreateRefusesBadOptions) {
  VirtualClock clock(0);
  SimOptions sim{.hardware = Hw("h200"), .model = Model("qwen3-235b-a22b"), .clock = &clock};
  Result<ModelConfig> config = SimModelConfig(sim.model, 4096);
  ASSERT_THAT(config.status(), IsOk());
  const ModelRunnerOptions o{.devices = 8};
  EXPECT_THAT(CreateSimRunner(*config, o, sim).status(), IsOk());
  SimOptions no_clock = sim;
  no_clock.clock = nullptr;
  EXPECT_THAT(CreateSimRunner(*config, o, no_clock).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("clock")));
  ModelConfig other = *config;
  other.expert_inter = 1024;
  EXPECT_THAT(CreateSimRunner(other, o, sim).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expert_inter")));
  EXPECT_THAT(CreateSimRunner(*config, {.devices = 0}, sim).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("devices")));
  EXPECT_THAT(CreateSimRunner(*config, {.devices = 8, .expert_phy2log = {{1, 2}}}, sim).status(),
              StatusIs(StatusCode::kInvalidArgument));
  SimOptions bad_eff = sim;
  bad_eff.efficiency.hbm = 0;
  EXPECT_THAT(CreateSimRunner(*config, o, bad_eff).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("efficiency")));
  SimOptions bad_skew = sim;
  bad_skew.routing.skew = -1;
  EXPECT_THAT(CreateSimRunner(*config, o, bad_skew).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("skew")));
}

TEST(SimRunnerTest, SimModelConfigFollowsTheSpec) {
  Result<ModelConfig> q = SimModelConfig(Model("qwen3-235b-a22b"), 4096);
  ASSERT_THAT(q.status(), IsOk());
  EXPECT_EQ(q->arch, "moe");
  EXPECT_EQ(q->layers, 94);
  EXPECT_EQ(q->kv_heads, 4);
  EXPECT_EQ(q->experts, 128);
  EXPECT_EQ(q->top_k, 8);
  EXPECT_EQ(q->shared_inter, 0);
  EXPECT_EQ(q->eos_token, 151935);
  EXPECT_EQ(q->max_seq, 4096);
  Result<ModelConfig> ds = SimModelConfig(Model("deepseek-v3"), 4096);
  ASSERT_THAT(ds.status(), IsOk());
  EXPECT_TRUE(ds->hybrid());
  EXPECT_EQ(ds->full_attention_layers(), 61);
  EXPECT_EQ(ds->first_k_dense_replace, 3);
  EXPECT_EQ(ds->mla_latent_dim(), 576);
  Result<ModelConfig> ling = SimModelConfig(Model("ling3-tiny"), 4096);
  ASSERT_THAT(ling.status(), IsOk());
  EXPECT_EQ(ling->linear_layers(), 18);
  EXPECT_EQ(ling->linear_kind, AttentionKind::kKda);
  EXPECT_THAT(SimModelConfig(Model("qwen3-235b-a22b"), 1).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_seq")));
  costmodel::ModelSpec broken = Model("qwen3-235b-a22b");
  broken.top_k = 0;
  EXPECT_THAT(SimModelConfig(broken, 4096).status(), StatusIs(StatusCode::kInvalidArgument));
}

TEST(SimRunnerTest, KvPagesFillTheHbmLeftAfterTheWeights) {
  SimOptions sim{.hardware = Hw("h200"), .model = Model("qwen3-235b-a22b")};
  Result<int> pages = SimKvPagesPerDevice(sim, 8, 16, 0.1);
  ASSERT_THAT(pages.status(), IsOk());
  costmodel::StepOptions one;
  one.tokens = 1;
  one.devices = 8;
  Result<costmodel::StepCost> c = costmodel::EstimateStep(sim.hardware, sim.model, one);
  ASSERT_THAT(c.status(), IsOk());
  const double page = 16.0 * 94 * 2 * 4 * 128 * 2;  // tokens x layers x K,V x heads x dim x bf16
  const double cap = 0.9 * 141e9;
  std::printf("Qwen3-235B on 8xH200: %.1f GB weights per device, %d KV pages of 16 tokens\n",
              c->weight_bytes_per_device / 1e9, *pages);
  EXPECT_LE(c->weight_bytes_per_device + *pages * page, cap);
  EXPECT_GT(c->weight_bytes_per_device + (*pages + 1) * page, cap);
  EXPECT_GT(*SimKvPagesPerDevice(sim, 8, 16, 0.0), *pages);
  SimOptions big{.hardware = Hw("h100"), .model = Model("deepseek-v3")};
  EXPECT_THAT(SimKvPagesPerDevice(big, 1, 16).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("GB")));
  EXPECT_THAT(SimKvPagesPerDevice(sim, 8, 16, 1.0).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("reserve")));
}

double ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// The CPU cost of simulating a step (the 10-simulated-minutes-in-under-a-
// minute goal): printed per shape, not asserted.
TEST(SimRunnerTest, StepCpuCost) {
  struct Shape {
    const char* name;
    int seqs, new_tokens, context;
  };
  for (const Shape& s :
       {Shape{"decode 8", 8, 1, 2048}, Shape{"decode 256", 256, 1, 2048},
        Shape{"decode 1024", 1024, 1, 2048}, Shape{"prefill 16x1024", 16, 1024, 0}}) {
    SimRig rig = Qwen(1.0, 200);
    const BatchInput b = Batch(s.seqs, 8, s.new_tokens, s.context);
    const int steps = 300;
    // Thread CPU time: the machine is shared, wall time would measure the neighbours.
    const double t0 = ThreadCpuUs();
    for (int i = 0; i < steps; ++i) {
      Result<StepOutput> out = rig.runner->Step(b, TraceLevel::kSummary);
      ASSERT_TRUE(out.ok());
    }
    const double cpu_us = (ThreadCpuUs() - t0) / steps;
    const double sim_ms = rig.now() / 1e3 / steps;
    std::printf(
        "Qwen3 8xH200 EP %-16s kSummary: %7.1f us CPU per step, %7.3f ms simulated (x%.0f)\n",
        s.name, cpu_us, sim_ms, sim_ms * 1e3 / cpu_us);
  }
}

}  // namespace
}  // namespace sy::engine
