// The SimRunner's between-step operations (engine/sim/sim_moves.cc): the
// TP <-> EP switch (priced, refusals, faults), live expert moves and a
// rebalance that helps, re-homed state copies, bookkeeping-only pools, and a
// whole Scheduler-driven run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <utility>

#include "base/status_matchers.h"
#include "engine/costmodel/cost_model.h"
#include "engine/eplb/placement.h"
#include "engine/scheduler/scheduler.h"
#include "engine/sim/sim_runner.h"
#include "tests/engine/sim/sim_test_util.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

TEST(SimMovesTest, SwitchAdvancesTheClockByTheReshard) {
  SimRig rig = MakeRig("h200", "qwen3-235b-a22b", 8);
  std::vector<std::vector<int32_t>> held(8);
  for (int d = 0; d < 8; ++d)
    ASSERT_THAT(rig.runner->kv_pool(d).Allocate(100 + d, &held[d]), IsOk());
  const int64_t t0 = rig.now();
  Result<SwitchStats> s = rig.runner->SwitchParallelism(ParallelMode::kTP, nullptr);
  ASSERT_THAT(s.status(), IsOk());
  Result<costmodel::ReshardCost> r = costmodel::EstimateReshard(
      rig.sim.hardware, rig.sim.model, {.devices = 8, .link_efficiency = 0.7});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_NEAR(s->weights_ms, r->time_s * 1e3, 1e-9);
  EXPECT_EQ(s->bytes_moved, std::llround(r->bytes_moved * 8));
  EXPECT_EQ(s->layers, 94);
  EXPECT_EQ(s->kv_pages, 8 * 100 + 28);
  const double page = 16.0 * 94 * 2 * 4 * 128 * 2;
  EXPECT_NEAR(s->state_bytes, (8 * 100 + 28) * page * 7 / 8, 8);
  EXPECT_GT(s->state_ms, 0);
  EXPECT_NEAR(s->total_ms, s->weights_ms + s->state_ms, 1e-9);
  EXPECT_EQ(rig.now() - t0, std::llround(s->total_ms * 1e3));
  std::printf(
      "Qwen3 8xH200 EP->TP: weights %.1f ms (%.1f GB moved), state %.2f ms, total %.1f ms\n",
      s->weights_ms, s->bytes_moved / 1e9, s->state_ms, s->total_ms);
  EXPECT_EQ(rig.runner->parallel_mode(), ParallelMode::kTP);
  EXPECT_EQ(rig.runner->kv_pool(3).shards(), 8);
  EXPECT_EQ(rig.runner->last_switch().to, ParallelMode::kTP);
  // Already there: nothing runs.
  const int64_t t1 = rig.now();
  Result<SwitchStats> again = rig.runner->SwitchParallelism(ParallelMode::kTP, nullptr);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->layers, 0);
  EXPECT_EQ(rig.now(), t1);
  ASSERT_THAT(rig.runner->SwitchParallelism(ParallelMode::kEP, nullptr).status(), IsOk());
  EXPECT_EQ(rig.runner->kv_pool(3).shards(), 1);
  EXPECT_EQ(rig.runner->parallel_mode(), ParallelMode::kEP);
}

// The CPU runner's refusals for the same shapes (parallel_switch.cc CheckSwitch).
TEST(SimMovesTest, SwitchRefusesTheShapesTheCpuRunnerRefuses) {
  costmodel::ModelSpec spec = TinySpec(6, 16, 4, 4);
  auto both = [&](const ModelRunnerOptions& o) {
    Result<ModelConfig> config = SimModelConfig(spec, 64);
    EXPECT_THAT(config.status(), IsOk());
    Result<std::unique_ptr<ModelRunner>> cpu = ModelRunner::Create(*config, o);
    EXPECT_THAT(cpu.status(), IsOk());
    VirtualClock clock(0);
    Result<std::unique_ptr<ModelRunner>> sim =
        CreateSimRunner(*config, o, {.hardware = Hw("h100"), .model = spec, .clock = &clock});
    EXPECT_THAT(sim.status(), IsOk());
    Status want = (*cpu)->SwitchParallelism(ParallelMode::kTP, nullptr).status();
    Status got = (*sim)->SwitchParallelism(ParallelMode::kTP, nullptr).status();
    EXPECT_EQ(clock.NowUs(), 0);
    EXPECT_EQ((*sim)->parallel_mode(), ParallelMode::kEP);
    return std::make_pair(want, got);
  };
  // 4 devices do not divide 6 experts.
  auto [want, got] = both({.devices = 4, .kv_pages_per_device = 4, .page_size = 4});
  EXPECT_THAT(got, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("divide experts")));
  EXPECT_EQ(got.message(), want.message());
  // Redundant experts: 8 slots for 6 experts on 2 devices.
  std::vector<std::vector<int>> rows(2, {0, 1, 2, 0, 3, 4, 5, 1});
  auto [want2, got2] =
      both({.devices = 2, .kv_pages_per_device = 4, .page_size = 4, .expert_phy2log = rows});
  EXPECT_THAT(got2, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("redundant experts")));
  EXPECT_EQ(got2.message(), want2.message());
  // KV heads: 3 devices and 3 experts-per... (6 experts, I=16 not divisible by 3).
  spec.expert_inter = 18;
  spec.kv_heads = 2;
  spec.heads = 4;
  auto [want3, got3] = both({.devices = 3, .kv_pages_per_device = 4, .page_size = 4});
  EXPECT_THAT(got3, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("KV heads")));
  EXPECT_EQ(got3.message(), want3.message());
}

TEST(SimMovesTest, SwitchFaultsRollBack) {
  SimRig rig = MakeRig("h200", "qwen3-235b-a22b", 8);
  const int64_t t0 = rig.now();
  FaultPlan weights{.rank = 2, .layer = 40, .phase = ReshardPhase::kExchange};
  Result<SwitchStats> s = rig.runner->SwitchParallelism(ParallelMode::kTP, &weights);
  EXPECT_THAT(s.status(), StatusIs(StatusCode::kUnavailable, HasSubstr("MoE layer 40")));
  EXPECT_TRUE(rig.runner->last_switch().rolled_back);
  EXPECT_GT(rig.runner->last_switch().rollback_ms, 0);
  EXPECT_EQ(rig.runner->parallel_mode(), ParallelMode::kEP);
  EXPECT_EQ(rig.runner->kv_pool(0).shards(), 1);
  EXPECT_EQ(rig.now() - t0, std::llround(rig.runner->last_switch().total_ms * 1e3));
  FaultPlan state{.rank = 1, .phase = ReshardPhase::kPlace, .part = SwitchPart::kState};
  EXPECT_THAT(
      rig.runner->SwitchParallelism(ParallelMode::kTP, &state).status(),
      StatusIs(StatusCode::kUnavailable, HasSubstr("state reshard EP->TP failed in place")));
  EXPECT_TRUE(rig.runner->last_switch().rolled_back);
  EXPECT_EQ(rig.runner->parallel_mode(), ParallelMode::kEP);
  // A plan for a layer that does not exist never fires (as on the CPU).
  FaultPlan nowhere{.rank = 0, .layer = 500};
  EXPECT_THAT(rig.runner->SwitchParallelism(ParallelMode::kTP, &nowhere).status(), IsOk());
  EXPECT_FALSE(rig.runner->last_switch().rolled_back);
}

// Layer 5's row with experts 0 and 1 (devices 0 and 1) exchanged.
std::vector<int> Swapped(const ExpertMap& map, int layer) {
  std::vector<int> row = map.phy2log_row(layer);
  std::swap(row[0], row[map.device_first_slot(1)]);
  return row;
}

TEST(SimMovesTest, StageAndCommitChangeTheMapAndPayTheCommit) {
  SimRig rig = MakeRig("h200", "qwen3-235b-a22b", 8);
  ModelRunner& r = *rig.runner;
  const ExpertMap before = r.expert_map();
  const std::vector<int> row = Swapped(before, 5);
  EXPECT_THAT(r.CommitExpertLayer(5).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no expert layer is staged")));
  EXPECT_THAT(r.StageExpertLayer(5, row, 1000).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("injected failure")));
  EXPECT_THAT(r.CommitExpertLayer(5).status(), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(r.StageExpertLayer(5, {1, 2}, -1).status(), StatusIs(StatusCode::kInvalidArgument));
  const int64_t t0 = rig.now();
  Result<ExpertMoveStats> staged = r.StageExpertLayer(5, row, -1);
  ASSERT_THAT(staged.status(), IsOk());
  EXPECT_EQ(staged->experts_moved, 2);
  EXPECT_EQ(staged->peer_bytes, staged->bytes_copied);
  EXPECT_EQ(staged->bytes_copied, 2 * 3LL * 4096 * 1536 * 2);
  EXPECT_GT(staged->stage_ms, 0);
  EXPECT_EQ(rig.now(), t0);  // staging overlaps serving
  EXPECT_TRUE(r.expert_map() == before);
  EXPECT_THAT(r.StageExpertLayer(6, Swapped(before, 6), -1).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("staged and not committed")));
  EXPECT_THAT(r.SwitchParallelism(ParallelMode::kTP, nullptr).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("a rebalance is in progress")));
  EXPECT_THAT(r.CommitExpertLayer(6).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is the one staged")));
  Result<ExpertMoveStats> done = r.CommitExpertLayer(5);
  ASSERT_THAT(done.status(), IsOk());
  EXPECT_GT(done->commit_ms, 0);
  EXPECT_EQ(rig.now() - t0, std::llround(done->commit_ms * 1e3));
  EXPECT_EQ(r.expert_map().phy2log_row(5), row);
  EXPECT_EQ(r.expert_map().phy2log_row(6), before.phy2log_row(6));
  // Abort drops a staged row.
  ASSERT_THAT(r.StageExpertLayer(7, Swapped(before, 7), -1).status(), IsOk());
  r.AbortStagedExpertLayer();
  EXPECT_THAT(r.CommitExpertLayer(7).status(), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(r.expert_map().phy2log_row(7), before.phy2log_row(7));
  // TP: no live moves.
  ASSERT_THAT(r.SwitchParallelism(ParallelMode::kTP, nullptr).status(), IsOk());
  EXPECT_THAT(r.StageExpertLayer(7, Swapped(before, 7), -1).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("EP layout")));
  // A dense layer has nothing to move.
  SimRig ds = MakeRig("h200", "deepseek-v3", 8);
  EXPECT_THAT(ds.runner->StageExpertLayer(1, ds.runner->expert_map().phy2log_row(1), -1).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("dense layer")));
}

// A skewed, fixed popularity: the EPLB placement of the observed load,
// applied layer by layer, shortens the MoE part of the step.
TEST(SimMovesTest, RebalanceOfASkewedLoadLowersTheMoeTime) {
  SimRig rig = MakeRig("h200", "qwen3-235b-a22b", 8, [](SimOptions& s) {
    s.routing.skew = 1.2;
    s.routing.drift_period_s = 0;
  });
  ModelRunner& r = *rig.runner;
  const BatchInput batch = Batch(512, 8, 1, 2048);
  auto moe_us = [&] {
    int64_t total = 0;
    std::vector<std::vector<int64_t>> load(94, std::vector<int64_t>(128, 0));
    for (int i = 0; i < 10; ++i) {
      Result<StepOutput> out = r.Step(batch, TraceLevel::kFull);
      EXPECT_TRUE(out.ok());
      int64_t step = 0;
      std::map<int, int64_t> end_of_combine, start_of_dispatch;
      for (const telemetry::Span& s : out->spans) {
        if (s.device == 0 && s.name == "dispatch") start_of_dispatch[s.layer] = s.start_us;
        if (s.device == 0 && s.name == "combine") end_of_combine[s.layer] = s.start_us + s.dur_us;
      }
      for (const auto& [layer, end] : end_of_combine) step += end - start_of_dispatch[layer];
      total += step;
      for (int l = 0; l < 94; ++l) {
        for (int e = 0; e < 128; ++e) load[l][e] += out->expert_counts[l][e];
      }
    }
    return std::make_pair(total / 10, load);
  };
  const auto [before_us, load] = moe_us();
  Result<EplbPlacement> plan = RebalanceExperts(
      load, {.num_replicas = 128, .num_devices = 8, .policy = EplbPolicy::kGlobal});
  ASSERT_THAT(plan.status(), IsOk());
  for (int l = 0; l < 94; ++l) {
    ASSERT_THAT(r.StageExpertLayer(l, plan->phy2log[l], -1).status(), IsOk());
    ASSERT_THAT(r.CommitExpertLayer(l).status(), IsOk());
  }
  const auto [after_us, unused] = moe_us();
  std::printf("skew 1.2, decode 512: dispatch..combine %.3f ms per step before EPLB, %.3f after\n",
              before_us / 1e3, after_us / 1e3);
  EXPECT_LT(after_us, before_us * 0.95);
}

TEST(SimMovesTest, MoveRequestStateChecksAndPays) {
  SimRig rig = MakeRig("h200", "qwen3-235b-a22b", 8);
  ModelRunner& r = *rig.runner;
  auto move = [](int from, int to, std::vector<int32_t> a, std::vector<int32_t> b, int slot = -1) {
    StateMove m;
    m.request_id = 4;
    m.from = from;
    m.to = to;
    m.from_pages = std::move(a);
    m.to_pages = std::move(b);
    m.from_slot = slot;
    return m;
  };
  EXPECT_THAT(r.MoveRequestState({move(0, 9, {}, {})}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("request 4: device out of range")));
  EXPECT_THAT(r.MoveRequestState({move(0, 1, {1}, {})}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("different lengths")));
  EXPECT_THAT(r.MoveRequestState({move(0, 1, {1 << 20}, {0})}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("page out of range")));
  EXPECT_THAT(r.MoveRequestState({move(0, 1, {}, {}, 0)}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("state slot out of range")));
  const int64_t t0 = rig.now();
  std::vector<int32_t> pages(64);
  std::iota(pages.begin(), pages.end(), 0);
  ASSERT_THAT(r.MoveRequestState({move(0, 3, pages, pages)}), IsOk());
  EXPECT_GT(rig.now(), t0);
}

TEST(SimMovesTest, BookkeepingPoolsAllocateNoStorage) {
  KvPool kv({.num_pages = 1 << 20,
             .page_size = 16,
             .layers = 94,
             .kv_heads = 4,
             .head_dim = 128,
             .allocate_storage = false});
  EXPECT_FALSE(kv.has_storage());
  EXPECT_EQ(kv.bytes(), int64_t{1 << 20} * kv.page_bytes());
  std::vector<int32_t> pages;
  ASSERT_THAT(kv.Allocate(3, &pages), IsOk());
  EXPECT_EQ(pages, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kv.used_pages(), 3);
  EXPECT_THAT(kv.SetShards(8), IsOk());
  EXPECT_EQ(kv.storage_pages(), 8 << 20);
  EXPECT_THAT(kv.SetShards(3), StatusIs(StatusCode::kInvalidArgument));
  kv.Free(pages);
  EXPECT_EQ(kv.free_pages(), 1 << 20);
  StatePool st(
      {.slots = 100000, .layers = 18, .state_floats = 16 * 128 * 128, .allocate_storage = false});
  EXPECT_FALSE(st.has_storage());
  Result<int> slot = st.Allocate();
  ASSERT_THAT(slot.status(), IsOk());
  EXPECT_EQ(st.UsedSlots(), std::vector<int>{0});
  EXPECT_THAT(st.SetShards(4), IsOk());
  st.Free(*slot);
  EXPECT_EQ(st.free_slots(), 100000);
  KvPool real({.num_pages = 2, .page_size = 4, .layers = 1, .kv_heads = 1, .head_dim = 2});
  EXPECT_TRUE(real.has_storage());
  EXPECT_EQ(real.bytes(), 2 * real.page_bytes());
}

// Scheduler + SimRunner, as the engine drives them: every request finishes
// and every page and slot comes back.
void RunToCompletion(SimRig& rig, int requests, int prompt, int max_new) {
  ModelRunner& r = *rig.runner;
  const ModelConfig& c = r.config();
  SchedulerOptions o{.max_batch_tokens = 4096,
                     .max_running = 256,
                     .max_seq = c.max_seq,
                     .vocab = c.vocab,
                     .eos_token = c.eos_token,
                     .prefix_cache = true};
  std::vector<KvPool*> kv;
  std::vector<StatePool*> st;
  for (int d = 0; d < r.devices(); ++d) {
    kv.push_back(&r.kv_pool(d));
    if (c.linear_layers() > 0) st.push_back(&r.state_pool(d));
  }
  Scheduler sched(o, kv, st);
  for (int i = 0; i < requests; ++i) {
    RequestSpec spec;
    spec.prompt.assign(prompt + (i * 37) % prompt, 11 + i % 50);
    spec.max_new_tokens = max_new + i % 17;
    ASSERT_THAT(sched.Submit(spec, rig.now()).status(), IsOk());
  }
  int finished = 0, steps = 0;
  while (!sched.idle() && steps < 100000) {
    BatchInput b = sched.Plan();
    Result<StepOutput> out = r.Step(b, TraceLevel::kSummary);
    ASSERT_THAT(out.status(), IsOk());
    Result<std::vector<Request>> done = sched.Commit(*out, rig.now());
    ASSERT_THAT(done.status(), IsOk());
    for (const Request& q : *done) {
      EXPECT_EQ(static_cast<int>(q.generated.size()), q.spec.max_new_tokens);
      ++finished;
    }
    ++steps;
  }
  sched.FlushCache();
  EXPECT_EQ(finished, requests);
  for (int d = 0; d < r.devices(); ++d) {
    EXPECT_EQ(r.kv_pool(d).free_pages(), r.kv_pool(d).num_pages()) << d;
    EXPECT_EQ(r.state_pool(d).free_slots(), r.state_pool(d).slots()) << d;
  }
  std::printf("%s: %d requests in %d steps, %.2f simulated s\n", c.name.c_str(), requests, steps,
              rig.now() / 1e6);
}

TEST(SimMovesTest, SchedulerDrivenRunFinishesAndReturnsEveryPage) {
  SimRig qwen = MakeRig(
      "h200", "qwen3-235b-a22b", 8, [](SimOptions&) {}, 4096, 16, 2000);
  RunToCompletion(qwen, 300, 300, 40);
  SimRig ling = MakeRig(
      "h100", "ling3-tiny", 4, [](SimOptions&) {}, 4096, 16, 400);
  RunToCompletion(ling, 120, 200, 30);
}

}  // namespace
}  // namespace sy::engine
