// The Collector's expert placement, balancedness and rebalance state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/collect/collector.h"
#include "console/collect/experts.h"
#include "console/collect/rebalance_text.h"

namespace sy::console {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

constexpr int64_t kS = 1'000'000;

telemetry::Envelope Env(uint64_t seq, int64_t t_us, std::string run = "r1") {
  telemetry::Envelope e;
  e.run = std::move(run);
  e.seq = seq;
  e.t_us = t_us;
  return e;
}

// 4 experts + 2 redundant slots on 2 devices; e2 is replicated on both
// devices in layer 0, e1 three times in layer 1.
telemetry::ExpertLoad Placed(uint64_t seq, int64_t t_us, std::vector<double> balancedness) {
  telemetry::ExpertLoad m;
  m.env = Env(seq, t_us);
  m.step = static_cast<int64_t>(seq);
  m.counts = {{10, 20, 30, 10}, {5, 24, 25, 15}};
  m.expert_device = {0, 0, 1, 1};
  m.phy2log = {{0, 1, 2, 2, 3, 0}, {0, 1, 1, 2, 3, 1}};
  m.slot_device = {0, 0, 0, 1, 1, 1};
  m.balancedness = std::move(balancedness);
  return m;
}

telemetry::Event RebalanceEvent(uint64_t seq, std::string name, std::string phase,
                                nlohmann::json detail, std::string message = "") {
  telemetry::Event e;
  e.env = Env(seq, 5 * kS);
  e.kind = "rebalance";
  e.name = std::move(name);
  e.phase = std::move(phase);
  e.message = std::move(message);
  e.detail = std::move(detail);
  return e;
}

std::vector<std::string> LogTexts(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& l : s.log) out.push_back(l.text);
  return out;
}

TEST(ConsoleExperts, LayerBalancednessSplitsExpertsOverReplicas) {
  // Layer 0: dev0 = 10/2 + 20 + 30/2 = 40, dev1 = 15 + 10 + 5 = 30 -> 35/40.
  // Layer 1: e1 on three slots (8 each): dev0 = 5 + 8 + 8, dev1 = 25 + 15 + 8.
  const auto b = LayerBalancedness({{10, 20, 30, 10}, {5, 24, 25, 15}},
                                   {{0, 1, 2, 2, 3, 0}, {0, 1, 1, 2, 3, 1}}, {0, 0, 0, 1, 1, 1});
  EXPECT_THAT(b, ElementsAre(DoubleEq(0.875), DoubleEq(34.5 / 48)));
  // No tokens is perfectly balanced; no devices, nothing to say.
  EXPECT_THAT(LayerBalancedness({{0, 0}}, {{0, 1}}, {0, 1}), ElementsAre(1.0));
  EXPECT_TRUE(LayerBalancedness({{1, 2}}, {{0, 1}}, {}).empty());
  // Out-of-range experts and devices are ignored, not trusted.
  EXPECT_THAT(LayerBalancedness({{4, 4}}, {{0, 1, 7}}, {0, 1, -1}), ElementsAre(1.0));
}

TEST(ConsoleExperts, PlacementFromTheEngineAndTokensPerSlot) {
  Collector c;
  c.Consume(Placed(0, 1000, {0.875, 0.75}));
  const Snapshot s = c.TakeSnapshot();
  EXPECT_TRUE(s.placement_reported);
  EXPECT_THAT(s.slot_device, ElementsAre(0, 0, 0, 1, 1, 1));
  ASSERT_EQ(s.phy2log.size(), 2u);
  EXPECT_THAT(s.phy2log[1], ElementsAre(0, 1, 1, 2, 3, 1));
  ASSERT_EQ(s.slot_tokens.size(), 2u);
  EXPECT_THAT(s.slot_tokens[0], ElementsAre(5, 20, 15, 15, 10, 5));
  EXPECT_THAT(s.slot_tokens[1], ElementsAre(5, 8, 8, 25, 15, 8));
  // Device totals follow the replicas: dev0 = 40 + 21, dev1 = 30 + 48.
  EXPECT_THAT(s.device_tokens, ElementsAre(61, 78));
  EXPECT_THAT(s.balancedness, ElementsAre(0.875, 0.75));  // the engine's values
}

TEST(ConsoleExperts, BalancednessWindowMeanAndPerSecondTrend) {
  CollectorOptions o;
  o.expert_window_steps = 2;
  o.series_seconds = 3;
  Collector c(o);
  // Second 0: two steps; second 1: one; second 4: one (pushes 0 and 1 out
  // of a 3-second trend).
  c.Consume(Placed(0, 100'000, {0.5, 1.0}));
  c.Consume(Placed(1, 900'000, {0.7, 1.0}));
  c.Consume(Placed(2, 1 * kS + 5, {0.9, 0.8}));
  Snapshot s = c.TakeSnapshot();
  // The window holds the last two steps.
  EXPECT_THAT(s.balancedness, ElementsAre(DoubleEq(0.8), DoubleEq(0.9)));
  ASSERT_EQ(s.balancedness_trend.size(), 2u);
  EXPECT_THAT(s.balancedness_trend[0], ElementsAre(DoubleEq(0.6), DoubleEq(0.9)));
  EXPECT_THAT(s.balancedness_trend[1], ElementsAre(DoubleEq(1.0), DoubleEq(0.8)));
  c.Consume(Placed(3, 4 * kS, {0.95, 0.85}));
  s = c.TakeSnapshot();
  EXPECT_THAT(s.balancedness_trend[0], ElementsAre(DoubleEq(0.95)));
}

// An engine before EPLB sends neither placement nor balancedness: one slot
// per expert on its device, and balancedness computed from the counts.
TEST(ConsoleExperts, OlderEnginesGetOneSlotPerExpertAndComputedBalancedness) {
  Collector c;
  telemetry::Meta meta;
  meta.env = Env(0, 0);
  meta.devices = 2;
  meta.expert_device = {0, 0, 1, 1};
  c.Consume(meta);
  telemetry::ExpertLoad m;
  m.env = Env(0, 1000);
  m.counts = {{10, 20, 30, 10}, {0, 0, 0, 0}};
  c.Consume(m);
  const Snapshot s = c.TakeSnapshot();
  EXPECT_FALSE(s.placement_reported);
  EXPECT_THAT(s.slot_device, ElementsAre(0, 0, 1, 1));
  ASSERT_EQ(s.phy2log.size(), 2u);
  EXPECT_THAT(s.phy2log[0], ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(s.slot_tokens[0], ElementsAre(10, 20, 30, 10));
  // dev0 30, dev1 40: 35/40; the idle layer is balanced.
  EXPECT_THAT(s.balancedness, ElementsAre(DoubleEq(0.875), DoubleEq(1.0)));
  EXPECT_THAT(s.device_tokens, ElementsAre(30, 40));
}

TEST(ConsoleExperts, NewRunForgetsThePlacement) {
  Collector c;
  c.Consume(Placed(0, 1000, {0.875, 0.75}));
  telemetry::Step st;
  st.env = Env(0, 0, "r2");
  c.Consume(st);
  const Snapshot s = c.TakeSnapshot();
  EXPECT_TRUE(s.phy2log.empty());
  EXPECT_TRUE(s.balancedness.empty());
  EXPECT_FALSE(s.placement_reported);
}

TEST(ConsoleExperts, RebalanceEventsBecomeLogLinesAndStatus) {
  Collector c;
  c.Consume(RebalanceEvent(0, "rebalance", "planned",
                           {{"layers",
                             {{{"layer", 0}, {"before", 0.6}, {"after", 0.9}, {"moved", 2}},
                              {{"layer", 1}, {"before", 0.8}, {"after", 0.9}, {"moved", 1}}}},
                            {"experts_moved", 3},
                            {"bytes", 1536 * 1024},
                            {"window", 100}}));
  Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.rebalance.phase, "planned");
  EXPECT_EQ(s.rebalance.layers_planned, 2);
  EXPECT_DOUBLE_EQ(s.rebalance.before, 0.7);
  EXPECT_DOUBLE_EQ(s.rebalance.after, 0.9);
  EXPECT_THAT(LogTexts(s),
              ElementsAre("rebalance planned plan: 3 experts move (1.50 MiB) in 2 of 2 layers, "
                          "window 100 steps; balancedness 0.70 -> 0.90",
                          "  layer  before  after  moved", "  L0       0.60   0.90      2",
                          "  L1       0.80   0.90      1"));

  c.Consume(RebalanceEvent(1, "rebalance", "layer",
                           {{"layer", 0},
                            {"moved", 2},
                            {"bytes", 1024 * 1024},
                            {"stage_ms", 12.5},
                            {"commit_ms", 0.4}}));
  s = c.TakeSnapshot();
  EXPECT_EQ(s.rebalance.phase, "layer");
  EXPECT_EQ(s.rebalance.layers_done, 1);
  EXPECT_EQ(s.log.back().text,
            "rebalance layer L0 committed: 2 moved, 1.00 MiB, staged 12.5ms, pause 0.40ms");

  c.Consume(RebalanceEvent(2, "rebalance", "done",
                           {{"layers", 2},
                            {"experts_moved", 3},
                            {"bytes", 1536 * 1024},
                            {"longest_pause_ms", 0.8},
                            {"before", {0.6, 0.8}},
                            {"after", {0.92, 0.96}},
                            {"moe_ms_before", 4.1}}));
  s = c.TakeSnapshot();
  EXPECT_EQ(s.rebalance.phase, "done");
  EXPECT_DOUBLE_EQ(s.rebalance.after, 0.94);
  EXPECT_DOUBLE_EQ(s.rebalance.longest_pause_ms, 0.8);
  EXPECT_EQ(s.log.back().text,
            "rebalance done: 2 layers, 3 experts, 1.50 MiB; balancedness 0.70 -> 0.94 predicted, "
            "longest pause 0.80ms");
  EXPECT_EQ(s.log.back().level, LogLevel::kInfo);

  c.Consume(RebalanceEvent(2, "rebalance", "measured",
                           {{"balancedness_before", 0.68},
                            {"balancedness_after", 0.91},
                            {"moe_ms_before", 4.1},
                            {"moe_ms_after", 3.2},
                            {"steps", 32}}));
  s = c.TakeSnapshot();
  EXPECT_EQ(s.rebalance.phase, "measured");
  EXPECT_DOUBLE_EQ(s.rebalance.measured_after, 0.91);
  EXPECT_DOUBLE_EQ(s.rebalance.moe_ms_after, 3.2);
  EXPECT_EQ(s.rebalance.experts_moved, 3) << "measured keeps what done said";
  EXPECT_EQ(s.log.back().text,
            "rebalance measured: balancedness 0.68 -> 0.91 over 32 steps each side, MoE 4.10ms "
            "-> 3.20ms per step");

  c.Consume(
      RebalanceEvent(3, "rebalance", "failed",
                     {{"layer", 1}, {"error", "staging buffer full"}, {"rolled_back", true}}));
  s = c.TakeSnapshot();
  EXPECT_EQ(s.rebalance.phase, "failed");
  EXPECT_EQ(s.rebalance.error, "L1: staging buffer full");
  EXPECT_TRUE(s.rebalance.rolled_back);
  EXPECT_EQ(s.log.back().text,
            "rebalance failed at L1: staging buffer full; rolled back to the old placement");
  EXPECT_EQ(s.log.back().level, LogLevel::kError);

  c.Consume(
      RebalanceEvent(4, "auto", "skipped", nlohmann::json::object(), "predicted gain 0.01 < 0.05"));
  s = c.TakeSnapshot();
  EXPECT_EQ(s.rebalance.auto_last, "skipped: predicted gain 0.01 < 0.05");
  EXPECT_EQ(s.log.back().text, "rebalance auto skipped: predicted gain 0.01 < 0.05");
  EXPECT_EQ(s.rebalance.phase, "failed");  // auto decisions leave the last rebalance
}

// The wire only promises an object: odd details still give a line.
TEST(ConsoleExperts, MalformedRebalanceDetailsAreTolerated) {
  Collector c;
  c.Consume(RebalanceEvent(0, "rebalance", "done",
                           {{"layers", "two"}, {"before", "x"}, {"after", {1, "y"}}}));
  c.Consume(RebalanceEvent(1, "rebalance", "planned", {{"layers", 5}}));
  c.Consume(RebalanceEvent(2, "rebalance", "failed", {{"rolled_back", "yes"}}));
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.log[0].text,
            "rebalance done: 0 layers, 0 experts, 0 B; balancedness 0.00 -> 1.00 predicted, "
            "longest pause 0.00ms");
  EXPECT_EQ(s.log[1].text,
            "rebalance planned plan: 0 experts move (0 B) in 0 of 0 layers, window 0 steps; "
            "balancedness 1.00 -> 1.00");
  EXPECT_EQ(s.log[2].text, "rebalance failed at L0: ; NOT rolled back (placement mixed)");
}

TEST(ConsoleExperts, RebalanceAutoReplySetsTheMode) {
  Collector c;
  c.ApplyCommandResult("rebalance_auto", {{"every", 500}, {"min_gain", 0.05}, {"window", 200}});
  Snapshot s = c.TakeSnapshot();
  EXPECT_TRUE(s.rebalance.auto_known);
  EXPECT_EQ(s.rebalance.auto_every, 500);
  EXPECT_DOUBLE_EQ(s.rebalance.auto_min_gain, 0.05);
  EXPECT_EQ(s.rebalance.auto_window, 200);
  c.ApplyCommandResult("rebalance_auto", {{"every", 0}, {"min_gain", 0.05}, {"window", 200}});
  EXPECT_EQ(c.TakeSnapshot().rebalance.auto_every, 0);
  // Another command's result with the same keys changes nothing.
  c.ApplyCommandResult("status", {{"every", 7}});
  EXPECT_EQ(c.TakeSnapshot().rebalance.auto_every, 0);
}

TEST(ConsoleExperts, PlanSummaryAndQuestion) {
  const nlohmann::json plan = {{"layers",
                                {{{"layer", 0}, {"before", 0.5}, {"after", 1.0}, {"moved", 4}},
                                 {{"layer", 1}, {"before", 1.0}, {"after", 1.0}, {"moved", 0}}}},
                               {"experts_moved", 4},
                               {"bytes", 4 << 20},
                               {"window", 100}};
  const PlanSummary p = SummarizePlan(plan);
  EXPECT_EQ(p.layers, 2);
  EXPECT_EQ(p.layers_moved, 1);
  EXPECT_DOUBLE_EQ(p.before, 0.75);
  EXPECT_EQ(PlanQuestion(p), "Apply: 4 experts, 4.00 MiB, balancedness 0.75 -> 1.00? (y/n)");
  EXPECT_EQ(PlanLines(plan, 1).back(), "  … 1 more layers");
  EXPECT_EQ(FormatMoveBytes(512), "512 B");
  EXPECT_EQ(FormatMoveBytes(3 * 1024), "3.00 KiB");
  EXPECT_EQ(FormatMoveBytes(int64_t{5} << 30), "5.00 GiB");
}

}  // namespace
}  // namespace sy::console
