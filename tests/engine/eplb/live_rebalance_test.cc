// Live rebalance end to end on the real model: a skewed workload served by
// the Scheduler and the ModelRunner, recorded by ExpertStats; part-way
// through, PlanRebalance + RebalanceApplier move the experts layer by layer
// while serving goes on. Greedy tokens must equal those of a run that never
// rebalanced, measured balancedness must rise, and an injected failure must
// leave the old placement in place.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "base/status_matchers.h"
#include "engine/eplb/applier.h"
#include "engine/eplb/expert_stats.h"
#include "engine/eplb/rebalance_plan.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/scheduler/scheduler.h"
#include "engine/workload/workload.h"

namespace sy::engine::eplb {
namespace {

struct Served {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::vector<ApplierEvent> events;
  double balance_before = 0, balance_after = 0;  // mean step balancedness, 16 steps
  std::vector<std::vector<int>> initial_rows, final_rows;
  int64_t steps = 0;
};

struct Scenario {
  std::string preset = "tiny";
  int redundant = 0;
  bool rebalance = false;
  std::optional<ApplierFault> fault = std::nullopt;
  int fault_nth_layer = -1;  // inject at the n-th changed layer of the plan
};

std::vector<Arrival> Arrivals() {
  WorkloadOptions w = WorkloadOptions::ForKind(WorkloadKind::kPoisson);
  w.seed = 5;
  w.max_requests = 24;
  w.ignore_eos = true;
  w.rate = 200;
  w.output_len = {LengthDist::Kind::kUniform, 24, 40};
  w.prompt_len = {LengthDist::Kind::kUniform, 8, 32};
  w.max_prompt_tokens = 200;
  EXPECT_THAT(w.Validate(), IsOk());
  return WorkloadGenerator(w).Schedule();
}

Served Serve(const Scenario& s) {
  Served out;
  const ModelConfig config = *PresetConfig(s.preset);
  ModelRunnerOptions ro{.devices = 4, .seed = 3, .kv_pages_per_device = 256};
  ro.router_skew = 1.5;
  if (s.redundant > 0) {
    Result<std::vector<std::vector<int>>> rows =
        InitialPlacement(config.layers, config.experts, 4, s.redundant);
    EXPECT_THAT(rows.status(), IsOk());
    ro.expert_phy2log = *rows;
  }
  auto runner = ModelRunner::Create(config, ro);
  EXPECT_THAT(runner.status(), IsOk());
  if (!runner.ok()) return out;
  ModelRunner& r = **runner;
  auto stats = ExpertStats::Create(config.layers, config.experts);
  EXPECT_THAT(stats.status(), IsOk());
  SchedulerOptions so;
  so.max_seq = config.max_seq;
  so.vocab = config.vocab;
  so.eos_token = config.eos_token;
  so.max_batch_tokens = 128;
  so.max_running = 24;
  std::vector<KvPool*> kv;
  std::vector<StatePool*> st;
  for (int d = 0; d < 4; ++d) {
    kv.push_back(&r.kv_pool(d));
    st.push_back(&r.state_pool(d));
  }
  Scheduler sched(so, kv, st);
  RebalanceApplier applier(&r);
  for (int l = 0; l < r.expert_map().layers(); ++l) {
    out.initial_rows.push_back(r.expert_map().phy2log_row(l));
  }
  const std::vector<Arrival> arr = Arrivals();
  size_t next = 0;
  bool started = false, finished = false;
  int64_t done_step = -1;
  for (int step = 0; step < 4000 && (next < arr.size() || !sched.idle()); ++step) {
    for (const ApplierEvent& ev : applier.Poll()) {
      out.events.push_back(ev);
      if (ev.kind != ApplierEvent::Kind::kLayer) {
        finished = true;
        done_step = step;
      }
    }
    while (next < arr.size() && arr[next].time_us <= step * 2'000LL) {
      EXPECT_THAT(sched.Submit(arr[next].spec, step).status(), IsOk());
      ++next;
    }
    if (s.rebalance && !started && step == 40) {
      Result<Placement> p = PlacementOf(r.expert_map());
      EXPECT_THAT(p.status(), IsOk());
      Result<Balancedness> b = stats->StepBalancedness(16);
      EXPECT_THAT(b.status(), IsOk());
      out.balance_before = b->mean;
      Result<RebalancePlan> plan = PlanRebalance(*stats, r.expert_map(), {.window = 40}, 1);
      EXPECT_THAT(plan.status(), IsOk());
      EXPECT_GT(plan->mean_after, plan->mean_before);
      std::optional<ApplierFault> fault = s.fault;
      if (s.fault_nth_layer >= 0) {
        const std::vector<int> changed = plan->ChangedLayers();
        EXPECT_GT(static_cast<int>(changed.size()), s.fault_nth_layer);
        fault = ApplierFault{.layer = changed[s.fault_nth_layer], .after_bytes = 4096};
      }
      EXPECT_THAT(applier.Start(*plan, fault), IsOk());
      EXPECT_TRUE(applier.busy());
      EXPECT_EQ(applier.Start(*plan).code(), StatusCode::kFailedPrecondition);
      started = true;
    }
    BatchInput b = sched.Plan();
    if (b.seqs.empty()) continue;
    auto step_out = r.Step(b, TraceLevel::kOff);
    EXPECT_THAT(step_out.status(), IsOk());
    if (!step_out.ok()) break;
    Result<Placement> p = PlacementOf(r.expert_map());
    EXPECT_THAT(stats->Record(b.step, step_out->expert_counts, &*p), IsOk());
    if (finished && done_step >= 0 && step == done_step + 16) {
      out.balance_after = stats->StepBalancedness(16)->mean;
    }
    auto done = sched.Commit(*step_out, step);
    EXPECT_THAT(done.status(), IsOk());
    for (const Request& q : *done) out.tokens[q.id] = q.generated;
    out.steps = step;
  }
  // Drain: the applier may still hold a layer when the workload ends.
  for (int i = 0; i < 1000 && applier.busy(); ++i) {
    for (const ApplierEvent& ev : applier.Poll()) out.events.push_back(ev);
  }
  EXPECT_TRUE(sched.idle());
  EXPECT_EQ(s.rebalance, finished) << "the rebalance must finish while serving";
  for (int l = 0; l < r.expert_map().layers(); ++l) {
    out.final_rows.push_back(r.expert_map().phy2log_row(l));
  }
  return out;
}

class LiveRebalanceTest : public ::testing::TestWithParam<int> {};

TEST_P(LiveRebalanceTest, RaisesBalancednessWithIdenticalTokens) {
  Scenario base{.redundant = GetParam()};
  const Served plain = Serve(base);
  Scenario moved = base;
  moved.rebalance = true;
  const Served live = Serve(moved);
  ASSERT_FALSE(plain.tokens.empty());
  EXPECT_EQ(plain.tokens, live.tokens);
  ASSERT_FALSE(live.events.empty());
  const ApplierEvent& last = live.events.back();
  EXPECT_EQ(last.kind, ApplierEvent::Kind::kDone) << last.error;
  EXPECT_GT(last.layers, 0);
  EXPECT_GT(last.experts_moved, 0);
  EXPECT_NE(live.initial_rows, live.final_rows);
  // Each commit is one layer: as many layer events as layers moved.
  int layer_events = 0;
  for (const ApplierEvent& ev : live.events) layer_events += ev.kind == ApplierEvent::Kind::kLayer;
  EXPECT_EQ(layer_events, last.layers);
  EXPECT_GT(live.balance_after, live.balance_before + 0.05)
      << "before " << live.balance_before << " after " << live.balance_after;
}

INSTANTIATE_TEST_SUITE_P(Replicas, LiveRebalanceTest, ::testing::Values(0, 4));

TEST(LiveRebalanceFailureTest, FailedStagingRestoresTheOldPlacement) {
  const Served plain = Serve({});
  Scenario failing{.rebalance = true, .fault_nth_layer = 1};
  const Served live = Serve(failing);
  EXPECT_EQ(plain.tokens, live.tokens);
  ASSERT_FALSE(live.events.empty());
  const ApplierEvent& last = live.events.back();
  ASSERT_EQ(last.kind, ApplierEvent::Kind::kFailed);
  EXPECT_TRUE(last.rolled_back) << last.error;
  EXPECT_NE(last.error.find("injected"), std::string::npos) << last.error;
  EXPECT_EQ(live.initial_rows, live.final_rows);
  bool saw_rollback = false;
  for (const ApplierEvent& ev : live.events) saw_rollback |= ev.rollback;
  EXPECT_TRUE(saw_rollback) << "the first layer was committed, so it must be moved back";
}

TEST(RebalancePlanTest, RefusesUnevenDevicesAndEmptyWindows) {
  const ModelConfig config = *PresetConfig("tiny");
  auto stats = ExpertStats::Create(config.layers, config.experts);
  ASSERT_THAT(stats.status(), IsOk());
  const ExpertMap uneven = ExpertMap::RoundRobin(config.layers, 0, config.experts, 3);
  EXPECT_EQ(PlanRebalance(*stats, uneven, {}, 1).status().code(), StatusCode::kFailedPrecondition);
  const ExpertMap even = ExpertMap::RoundRobin(config.layers, 0, config.experts, 4);
  EXPECT_EQ(PlanRebalance(*stats, even, {}, 1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(InitialPlacement(config.layers, config.experts, 4, 3).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RebalancePlanTest, InitialPlacementSpreadsReplicasOverDevices) {
  for (const auto& [experts, devices, redundant] :
       std::vector<std::tuple<int, int, int>>{{16, 4, 4}, {16, 4, 8}, {8, 2, 2}, {16, 3, 2}}) {
    Result<std::vector<std::vector<int>>> rows = InitialPlacement(2, experts, devices, redundant);
    ASSERT_THAT(rows.status(), IsOk());
    Result<ExpertMap> map = ExpertMap::DeviceMajor(2, 0, experts, devices, *rows);
    ASSERT_THAT(map.status(), IsOk()) << experts << "/" << devices << "+" << redundant;
    EXPECT_TRUE(map->uniform());
    for (int e = 0; e < experts; ++e) {
      std::set<int> on;
      for (int slot : map->replicas(1, e)) on.insert(map->slot_device(slot));
      EXPECT_EQ(on.size(), map->replicas(1, e).size()) << "expert " << e << " stacked on a device";
    }
    if (redundant == 0) continue;
    EXPECT_EQ(map->replicas(1, 0).size(), 2u) << "expert 0 gets the first spare slot";
  }
}

}  // namespace
}  // namespace sy::engine::eplb
