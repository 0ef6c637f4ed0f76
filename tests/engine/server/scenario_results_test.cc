// ScenarioRecorder's figures from hand-made requests and steps: per phase,
// and pooled by metric across phases the way seed 003 §9.2 reports a trace.
#include "engine/server/scenario_results.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kS = 1'000'000;

telemetry::RequestDone Done(double arrival_s, double ttft_ms, double tpot_ms, int outputs) {
  telemetry::RequestDone d;
  d.arrival_us = static_cast<int64_t>(arrival_s * kS);
  d.ttft_us = static_cast<int64_t>(ttft_ms * 1000);
  d.tpot_us = static_cast<int64_t>(tpot_ms * 1000);
  d.e2e_us = d.ttft_us + d.tpot_us * (outputs - 1);
  d.output_tokens = outputs;
  d.finish = "length";
  return d;
}

telemetry::Step StepEnding(double end_s, int64_t generated_total, int running, int waiting) {
  telemetry::Step s;
  s.start_us = static_cast<int64_t>(end_s * kS) - 1000;
  s.dur_us = 1000;
  s.generated_total = generated_total;
  s.running = running;
  s.waiting = waiting;
  return s;
}

// quiet [0, 10) s, burst [10, 12) s, quiet [12, 20) s (and its drain), and
// a makespan phase after them that pools with nothing.
VariantResult Record(const std::string& variant, double second_quiet_tpot) {
  ScenarioRecorder rec;
  rec.OnRequestDone(Done(1, 100, 40, 10));
  rec.OnRequestDone(Done(5, 300, 60, 10));
  rec.OnRequestDone(Done(10.5, 1000, 90, 10));
  rec.OnRequestDone(Done(11, 3000, 110, 10));
  rec.OnRequestDone(Done(15, 200, second_quiet_tpot, 10));
  rec.OnRequestDone(Done(16, 200, 70, 1));  // one token: no TPOT
  rec.OnStep(StepEnding(2, 100, 3, 0));
  rec.OnStep(StepEnding(11, 400, 40, 25));
  rec.OnStep(StepEnding(14, 600, 9, 2));
  const std::vector<ScenarioPhase> phases = {
      {"quiet", "tpot"}, {"burst", "ttft"}, {"quiet", "tpot"}, {"tail", "makespan"}};
  return rec.Finish(variant, phases,
                    {{0, 10 * kS}, {10 * kS, 12 * kS}, {12 * kS, 20 * kS}, {20 * kS, 30 * kS}},
                    /*workload_start_us=*/0);
}

TEST(ScenarioRecorderTest, PoolsPhasesThatShareALatencyMetric) {
  const VariantResult r = Record("tp", 80);
  ASSERT_EQ(r.phases.size(), 4u);
  EXPECT_DOUBLE_EQ(r.phases[0].tpot_mean_ms, 50);  // (40 + 60) / 2
  EXPECT_DOUBLE_EQ(r.phases[2].tpot_mean_ms, 80);
  // The two quiet phases pool; the burst and the makespan tail stand alone.
  ASSERT_EQ(r.pooled.size(), 1u);
  const PhaseResult& q = r.pooled[0];
  EXPECT_EQ(q.name, "quiet");  // one name, listed once
  EXPECT_EQ(q.metric, "tpot");
  EXPECT_EQ(q.requests, 4);
  EXPECT_DOUBLE_EQ(q.tpot_mean_ms, 60);  // (40 + 60 + 80) / 3: not the mean of the phase means
  EXPECT_DOUBLE_EQ(q.ttft_mean_ms, 200);
  EXPECT_DOUBLE_EQ(q.tpot_p99_ms, 80);
  EXPECT_DOUBLE_EQ(q.start_s, 0);
  EXPECT_DOUBLE_EQ(q.end_s, 20);
  // Steps in either quiet window: tokens 100 + 200 over 18 s; the burst's
  // step (running 40, waiting 25) is not among them.
  EXPECT_DOUBLE_EQ(q.output_tok_s, 300.0 / 18.0);
  EXPECT_EQ(q.running_max, 9);
  EXPECT_EQ(q.waiting_max, 2);
}

// decode_batch: the running count of the steps that decoded each request
// (after its first token, up to its end), over all of them.
TEST(ScenarioRecorderTest, DecodeBatchIsTheBatchThePhasesRequestsDecodedIn) {
  ScenarioRecorder rec;
  rec.OnRequestDone(Done(0, 1000, 1000, 4));   // first token at 1 s, ends at 4 s
  rec.OnRequestDone(Done(2, 1000, 1000, 3));   // first token at 3 s, ends at 5 s
  rec.OnRequestDone(Done(12, 1000, 1000, 1));  // one token: no decode step
  rec.OnStep(StepEnding(1, 1, 1, 0));          // the first request's prefill
  rec.OnStep(StepEnding(2, 2, 2, 0));
  rec.OnStep(StepEnding(3, 3, 4, 0));
  rec.OnStep(StepEnding(4, 4, 6, 0));
  rec.OnStep(StepEnding(5, 5, 10, 0));
  rec.OnStep(StepEnding(13, 6, 3, 0));
  const VariantResult r =
      rec.Finish("tp", {{"quiet", "tpot"}, {"burst", "ttft"}}, {{0, 10 * kS}, {10 * kS, 20 * kS}},
                 /*workload_start_us=*/0);
  ASSERT_EQ(r.phases.size(), 2u);
  // First: steps at 2, 3, 4 s (2 + 4 + 6); second: 4, 5 s (6 + 10).
  EXPECT_DOUBLE_EQ(r.phases[0].decode_batch, (12.0 + 16.0) / 5.0);
  EXPECT_EQ(r.phases[0].running_max, 10);
  EXPECT_DOUBLE_EQ(r.phases[1].decode_batch, 0);
  EXPECT_THAT(FormatScenarioTable(Scenario{}, {r}), HasSubstr("dec batch"));
}

TEST(ScenarioRecorderTest, PooledGroupsAreComparedAndPrinted) {
  Scenario s;
  s.name = "toy";
  s.model = "m";
  s.hardware = "h";
  s.devices = 2;
  s.phases = {{"quiet", "tpot"}, {"burst", "ttft"}, {"quiet", "tpot"}, {"tail", "makespan"}};
  // TP quiet pools to 60 ms, EP to 70 (second quiet at 110), auto to 66.
  const std::vector<VariantResult> results = {Record("tp", 80), Record("ep", 110),
                                              Record("auto", 98)};
  const std::vector<double> pooled = AutoVsBestStatic(results, /*pooled=*/true);
  ASSERT_EQ(pooled.size(), 1u);
  EXPECT_DOUBLE_EQ(pooled[0], 66.0 / 60.0);
  const std::string table = FormatScenarioTable(s, results);
  EXPECT_THAT(table, HasSubstr("pooled: every tpot phase (quiet), as seed 003 §9.2 reports them"));
  EXPECT_THAT(table, HasSubstr("best static: tp; auto is +10.0% (within 10%)"));
}

TEST(ScenarioRecorderTest, DistinctNamesJoinAndOnePhasePoolsNothing) {
  ScenarioRecorder rec;
  rec.OnRequestDone(Done(1, 100, 40, 4));
  rec.OnRequestDone(Done(3, 500, 40, 4));
  rec.OnStep(StepEnding(4, 8, 1, 0));  // the last phase ends with the last step
  const VariantResult two = rec.Finish("ep", {{"burst-80", "ttft"}, {"burst-120", "ttft"}},
                                       {{0, 2 * kS}, {2 * kS, 4 * kS}}, 0);
  ASSERT_EQ(two.pooled.size(), 1u);
  EXPECT_EQ(two.pooled[0].name, "burst-80+burst-120");
  EXPECT_DOUBLE_EQ(two.pooled[0].ttft_mean_ms, 300);
  EXPECT_DOUBLE_EQ(two.pooled[0].ttft_p99_ms, 500);
  const VariantResult one = rec.Finish("ep", {{"all", "ttft"}}, {{0, 4 * kS}}, 0);
  EXPECT_TRUE(one.pooled.empty());
}

}  // namespace
}  // namespace sy::engine
