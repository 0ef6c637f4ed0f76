#include "engine/eplb/expert_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>

#include "base/status_matchers.h"
#include "engine/eplb/eplb_cli.h"

// Counts every heap allocation of the process, so a test can show that
// Record allocates nothing once warm. A replaced operator new is the only way
// to observe allocations made inside the library; the counter is test-only.
// GCC pairs the inlined free() below with the replaced operator new at every
// delete site and calls it a mismatch, which it is not: both go to malloc.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace sy::engine::eplb {
namespace {

using ::testing::DoubleEq;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// A step's counts as a function of (step, layer, expert), so each window has
// one right answer computed independently of the ring.
int64_t CountAt(int64_t step, int layer, int expert) {
  return (step * 7 + layer * 3 + expert * 5) % 11 + (expert == 2 ? step % 4 : 0);
}

LoadMatrix StepCounts(int64_t step, int layers, int experts) {
  LoadMatrix m(static_cast<size_t>(layers), std::vector<int64_t>(static_cast<size_t>(experts)));
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) m[l][e] = CountAt(step, l, e);
  }
  return m;
}

// Sum of CountAt over steps [first, last], by brute force.
LoadMatrix Expected(int64_t first, int64_t last, int layers, int experts) {
  LoadMatrix m(static_cast<size_t>(layers), std::vector<int64_t>(static_cast<size_t>(experts), 0));
  for (int64_t s = first; s <= last; ++s) {
    for (int l = 0; l < layers; ++l) {
      for (int e = 0; e < experts; ++e) m[l][e] += CountAt(s, l, e);
    }
  }
  return m;
}

ExpertStats MakeStats(int layers, int experts, std::vector<int> windows = {10, 100, 1000}) {
  Result<ExpertStats> s = ExpertStats::Create(layers, experts, std::move(windows));
  EXPECT_THAT(s, IsOk());
  return std::move(s).value();
}

Placement MakePlacement(Result<Placement> p) {
  EXPECT_THAT(p, IsOk());
  return std::move(p).value();
}

TEST(ExpertStatsTest, ConstantLoadWindowsByHand) {
  ExpertStats s = MakeStats(1, 2);
  for (int64_t step = 0; step < 15; ++step) ASSERT_THAT(s.Record(step, {{1, 3}}), IsOk());
  EXPECT_THAT(*s.Window(10), ElementsAre(ElementsAre(10, 30)));
  EXPECT_THAT(*s.Window(100), ElementsAre(ElementsAre(15, 45)));
  EXPECT_THAT(*s.Window(1000), ElementsAre(ElementsAre(15, 45)));
  EXPECT_THAT(s.Accumulated(), ElementsAre(ElementsAre(15, 45)));
  EXPECT_EQ(s.WindowSteps(10), 10);
  EXPECT_EQ(s.WindowSteps(100), 15);
  EXPECT_EQ(s.WindowSteps(ExpertStats::kAll), 15);
}

TEST(ExpertStatsTest, WindowsSlideAfter5And10And15And1005Steps) {
  constexpr int kLayers = 3;
  constexpr int kExperts = 5;
  ExpertStats s = MakeStats(kLayers, kExperts);
  int64_t recorded = 0;
  for (int64_t target : {5, 10, 15, 1005}) {
    for (; recorded < target; ++recorded) {
      // Step ids with gaps: windows count recorded steps, not ids.
      ASSERT_THAT(s.Record(recorded * 2, StepCounts(recorded, kLayers, kExperts)), IsOk());
    }
    SCOPED_TRACE("after " + std::to_string(target) + " steps");
    EXPECT_EQ(s.steps_recorded(), target);
    for (int w : {10, 100, 1000, 1, 7, 250}) {  // configured, then summed from the ring
      const int64_t first = std::max<int64_t>(0, target - w);
      EXPECT_EQ(*s.Window(w), Expected(first, target - 1, kLayers, kExperts)) << "window " << w;
    }
    EXPECT_EQ(s.Accumulated(), Expected(0, target - 1, kLayers, kExperts));
    EXPECT_EQ(*s.Window(ExpertStats::kAll), s.Accumulated());
  }
  // Past the capacity, the largest window has dropped the first 5 steps.
  EXPECT_NE(*s.Window(1000), s.Accumulated());
}

TEST(ExpertStatsTest, IdentityPlacementOfRoundRobinLayout) {
  // Round-robin over 4 devices (expert e on e % 4): not device-major.
  Placement p = MakePlacement(Placement::FromExpertDevice({0, 1, 2, 3, 0, 1, 2, 3}, 4, 2));
  EXPECT_EQ(p.layers(), 2);
  EXPECT_EQ(p.experts(), 8);
  EXPECT_THAT(p.phy2log()[1], ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(p.phy_device()[1], ElementsAre(0, 1, 2, 3, 0, 1, 2, 3));
  EXPECT_EQ(p.replicas(1, 5), 1);

  ExpertStats s = MakeStats(2, 8);
  // Layer 0: every device gets 10 tokens; layer 1: experts 1 and 5 (device 1) only.
  ASSERT_THAT(s.Record(0, {{4, 4, 4, 4, 6, 6, 6, 6}, {0, 3, 0, 0, 0, 9, 0, 0}}), IsOk());
  EXPECT_THAT(*s.DeviceLoad(10, p),
              ElementsAre(ElementsAre(10, 10, 10, 10), ElementsAre(0, 12, 0, 0)));
  Balancedness b = *s.WindowBalancedness(10, p);
  EXPECT_THAT(b.per_layer, ElementsAre(DoubleEq(1.0), DoubleEq(0.25)));
  EXPECT_DOUBLE_EQ(b.mean, 0.625);
}

TEST(ExpertStatsTest, ReplicasSplitTokensWithRemainderToLowerSlots) {
  // Device-major, 2 devices x 2 slots: expert 0 on slots 0 (device 0) and 2 (device 1).
  Placement p = MakePlacement(Placement::FromDeviceMajor({{0, 1, 0, 2}}, 2));
  EXPECT_THAT(p.phy_device()[0], ElementsAre(0, 0, 1, 1));
  EXPECT_EQ(p.replicas(0, 0), 2);
  ExpertStats s = MakeStats(1, 3, {4});
  // 7 tokens of expert 0: 4 to slot 0 (the remainder goes to the lower slot), 3 to slot 2.
  ASSERT_THAT(s.Record(0, {{7, 3, 4}}), IsOk());
  EXPECT_THAT(*s.DeviceLoad(4, p), ElementsAre(ElementsAre(4 + 3, 3 + 4)));
  EXPECT_DOUBLE_EQ(s.WindowBalancedness(4, p)->mean, 1.0);
  // 5 more of expert 0 alone: window totals 12/3/4 -> device 0: 6 + 3, device 1: 6 + 4.
  ASSERT_THAT(s.Record(1, {{5, 0, 0}}), IsOk());
  EXPECT_THAT(*s.DeviceLoad(4, p), ElementsAre(ElementsAre(9, 10)));
  EXPECT_DOUBLE_EQ(s.WindowBalancedness(4, p)->per_layer[0], 9.5 / 10.0);
  // The same split per step: 5 -> 3 and 2, so the step alone is 2.5 / 3.
  std::vector<int64_t> load(2, 0);
  const std::vector<int64_t> tokens = {5, 0, 0};
  p.AddLayerLoad(0, tokens, load);
  EXPECT_THAT(load, ElementsAre(3, 2));
}

TEST(ExpertStatsTest, BalancednessOfEmptyLayerIsOne) {
  Placement p = MakePlacement(Placement::FromExpertDevice({0, 1, 2, 3}, 4, 2));
  ExpertStats s = MakeStats(2, 4);
  ASSERT_THAT(s.Record(0, {{0, 0, 0, 0}, {0, 0, 8, 0}}), IsOk());
  Balancedness b = *s.WindowBalancedness(10, p);
  EXPECT_THAT(b.per_layer, ElementsAre(DoubleEq(1.0), DoubleEq(0.25)));
  // Nothing recorded at all is balanced too.
  ExpertStats empty = MakeStats(2, 4);
  EXPECT_DOUBLE_EQ(empty.WindowBalancedness(10, p)->mean, 1.0);
}

TEST(ExpertStatsTest, StepBalancednessAveragesPerStepValues) {
  Placement p = MakePlacement(Placement::FromExpertDevice({0, 1, 2, 3}, 4, 1));
  ExpertStats s = MakeStats(1, 4, {2, 3});
  EXPECT_THAT(s.StepBalancedness(3), StatusIs(StatusCode::kFailedPrecondition));
  ASSERT_THAT(s.Record(1, {{5, 5, 5, 5}}, &p), IsOk());  // 1.0
  ASSERT_THAT(s.Record(2, {{0, 0, 0, 4}}, &p), IsOk());  // 0.25
  ASSERT_THAT(s.Record(3, {{9, 0, 0, 0}}), IsOk());      // no placement: skipped
  EXPECT_THAT(s.StepBalancedness(3)->per_layer, ElementsAre(DoubleEq(0.625)));
  // The last 2 steps hold only the 0.25 one.
  EXPECT_DOUBLE_EQ(s.StepBalancedness(2)->mean, 0.25);
  // The balancedness of the summed window differs: devices 14/5/5/9 over 3 steps.
  EXPECT_THAT(s.WindowBalancedness(3, p)->mean, DoubleNear(33.0 / 4.0 / 14.0, 1e-12));
  EXPECT_THAT(s.StepBalancedness(1), StatusIs(StatusCode::kFailedPrecondition));
}

TEST(ExpertStatsTest, HottestOrdersByTokensThenLayerThenExpert) {
  ExpertStats s = MakeStats(2, 4);
  ASSERT_THAT(s.Record(0, {{5, 0, 9, 5}, {5, 1, 0, 3}}), IsOk());
  std::vector<HotExpert> hot = *s.Hottest(10, 4);
  ASSERT_EQ(hot.size(), 4u);
  EXPECT_EQ(hot[0].layer, 0);
  EXPECT_EQ(hot[0].expert, 2);
  EXPECT_EQ(hot[0].tokens, 9);
  EXPECT_DOUBLE_EQ(hot[0].share, 9.0 / 19.0);
  // Three ties at 5 tokens: layer 0 expert 0, layer 0 expert 3, then layer 1 expert 0.
  EXPECT_EQ(std::make_pair(hot[1].layer, hot[1].expert), std::make_pair(0, 0));
  EXPECT_EQ(std::make_pair(hot[2].layer, hot[2].expert), std::make_pair(0, 3));
  EXPECT_EQ(std::make_pair(hot[3].layer, hot[3].expert), std::make_pair(1, 0));
  EXPECT_DOUBLE_EQ(hot[3].share, 5.0 / 9.0);
  // Zero-token pairs never count as hot: only 6 pairs carry load.
  EXPECT_EQ(s.Hottest(10, 100)->size(), 6u);
  EXPECT_TRUE(s.Hottest(10, 0)->empty());
  EXPECT_THAT(s.Hottest(10, -1), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ExpertStatsTest, JsonHasTheDumpShape) {
  constexpr int kLayers = 2;
  constexpr int kExperts = 4;
  Placement p = MakePlacement(Placement::FromExpertDevice({0, 1, 0, 1}, 2, kLayers));
  ExpertStats s = MakeStats(kLayers, kExperts);
  for (int64_t step = 0; step < 12; ++step) {
    ASSERT_THAT(s.Record(100 + step, StepCounts(step, kLayers, kExperts), &p), IsOk());
  }
  const nlohmann::json j = nlohmann::json::parse(*s.ToJson(10, p, 3));
  EXPECT_EQ(j.at("load").get<LoadMatrix>(), *s.Window(10));
  EXPECT_EQ(j.at("window"), 10);
  EXPECT_EQ(j.at("window_steps"), 10);
  EXPECT_EQ(j.at("steps_recorded"), 12);
  EXPECT_EQ(j.at("first_step"), 102);
  EXPECT_EQ(j.at("last_step"), 111);
  EXPECT_EQ(j.at("layers"), kLayers);
  EXPECT_EQ(j.at("experts"), kExperts);
  EXPECT_EQ(j.at("placement").at("devices"), 2);
  EXPECT_EQ(j.at("placement").at("phy2log").get<std::vector<std::vector<int>>>(), p.phy2log());
  EXPECT_EQ(j.at("placement").at("phy_device").get<std::vector<std::vector<int>>>(),
            p.phy_device());
  EXPECT_THAT(j.at("balancedness").get<std::vector<double>>(),
              Pointwise(DoubleEq(), s.WindowBalancedness(10, p)->per_layer));
  EXPECT_DOUBLE_EQ(j.at("balancedness_mean").get<double>(), s.WindowBalancedness(10, p)->mean);
  EXPECT_EQ(j.at("step_balancedness").size(), static_cast<size_t>(kLayers));
  ASSERT_EQ(j.at("hottest").size(), 3u);
  const std::vector<HotExpert> hot = *s.Hottest(10, 3);
  EXPECT_EQ(j.at("hottest")[0].at("layer"), hot[0].layer);
  EXPECT_EQ(j.at("hottest")[0].at("expert"), hot[0].expert);
  EXPECT_EQ(j.at("hottest")[0].at("tokens"), hot[0].tokens);
  EXPECT_DOUBLE_EQ(j.at("hottest")[0].at("share").get<double>(), hot[0].share);

  // The whole run, and an empty recorder.
  const nlohmann::json all = nlohmann::json::parse(*s.ToJson(ExpertStats::kAll, p));
  EXPECT_EQ(all.at("first_step"), 100);
  EXPECT_EQ(all.at("load").get<LoadMatrix>(), s.Accumulated());
  ExpertStats empty = MakeStats(kLayers, kExperts);
  const nlohmann::json e = nlohmann::json::parse(*empty.ToJson(100, p));
  EXPECT_TRUE(e.at("first_step").is_null());
  EXPECT_TRUE(e.at("step_balancedness").is_null());
  EXPECT_TRUE(e.at("hottest").empty());
  EXPECT_EQ(e.at("load").get<LoadMatrix>(), LoadMatrix(kLayers, std::vector<int64_t>(kExperts, 0)));
}

TEST(ExpertStatsTest, DumpWritesAtomicallyAndNamesAFailingPath) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("expert_stats_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  Placement p = MakePlacement(Placement::FromExpertDevice({0, 1}, 2, 1));
  ExpertStats s = MakeStats(1, 2);
  ASSERT_THAT(s.Record(0, {{3, 1}}, &p), IsOk());
  const std::string path = (dir / "load.json").string();
  {
    std::ofstream old(path);
    old << "old";
  }
  ASSERT_THAT(s.DumpJson(path, 10, p), IsOk());
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("load").get<LoadMatrix>(), LoadMatrix({{3, 1}}));
  // `moe-engine eplb --stats` reads the dump as its load matrix.
  Result<EplbLoad> eplb_load = ReadEplbLoadFile(path);
  ASSERT_THAT(eplb_load, IsOk());
  EXPECT_EQ(*eplb_load, EplbLoad({{3.0, 1.0}}));
  // Only the target is left: the temporary file was renamed onto it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);

  const std::string bad = (dir / "no_such_dir" / "load.json").string();
  EXPECT_THAT(s.DumpJson(bad, 10, p), StatusIs(StatusCode::kUnavailable, HasSubstr(bad)));
  EXPECT_FALSE(std::filesystem::exists(bad));
  std::filesystem::remove_all(dir);
}

TEST(ExpertStatsTest, RecordAllocatesNothingOnceWarm) {
  constexpr int kLayers = 4;
  constexpr int kExperts = 16;
  Placement p = MakePlacement(
      Placement::FromExpertDevice({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, 4, kLayers));
  ExpertStats s = MakeStats(kLayers, kExperts);
  std::vector<LoadMatrix> inputs;
  for (int64_t i = 0; i < 16; ++i) inputs.push_back(StepCounts(i, kLayers, kExperts));
  ASSERT_THAT(s.Record(0, inputs[0], &p), IsOk());  // warm-up: sizes the device scratch
  const size_t reserved = s.ReservedBytes();
  const long before = g_allocations.load();
  bool all_ok = true;
  for (int64_t step = 1; step <= 2500; ++step) {  // wraps the 1000-step ring twice
    all_ok = s.Record(step, inputs[static_cast<size_t>(step % 16)], step % 3 ? &p : nullptr).ok() &&
             all_ok;
  }
  const long after = g_allocations.load();
  EXPECT_TRUE(all_ok);
  EXPECT_EQ(after - before, 0);
  { std::vector<int> probe(3); }  // the counter does see allocations
  EXPECT_GT(g_allocations.load(), after);
  EXPECT_EQ(s.ReservedBytes(), reserved);
  EXPECT_EQ(s.steps_recorded(), 2501);
}

TEST(ExpertStatsTest, BadShapesAreRefusedAndLeaveNoTrace) {
  EXPECT_THAT(ExpertStats::Create(0, 4), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ExpertStats::Create(2, 0), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ExpertStats::Create(2, 4, {}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ExpertStats::Create(2, 4, {10, 0}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ExpertStats::Create(100000, 100000, {1000}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ExpertStats::Create(2, 4, {100, 10, 10})->windows(), ElementsAre(10, 100));

  ExpertStats s = MakeStats(2, 3, {2, 4});
  ASSERT_THAT(s.Record(5, {{1, 2, 3}, {4, 5, 6}}), IsOk());
  EXPECT_THAT(s.Record(6, {{1, 2, 3}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("layers")));
  EXPECT_THAT(s.Record(6, {{1, 2, 3}, {4, 5}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("layer 1")));
  EXPECT_THAT(s.Record(6, {{1, -2, 3}, {4, 5, 6}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expert 1")));
  EXPECT_THAT(s.Record(6, {{1, 2, int64_t{1} << 40}, {4, 5, 6}}),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Record(5, {{1, 2, 3}, {4, 5, 6}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not after")));
  Placement wrong = MakePlacement(Placement::FromExpertDevice({0, 1, 0, 1}, 2, 2));
  EXPECT_THAT(s.Record(6, {{1, 2, 3}, {4, 5, 6}}, &wrong),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("placement")));
  EXPECT_THAT(s.WindowBalancedness(2, wrong), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(s.ToJson(2, wrong), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Window(-1), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(s.Window(5), StatusIs(StatusCode::kInvalidArgument, HasSubstr("[1, 4]")));
  // None of the refused steps left a trace.
  EXPECT_EQ(s.steps_recorded(), 1);
  EXPECT_THAT(s.Accumulated(), ElementsAre(ElementsAre(1, 2, 3), ElementsAre(4, 5, 6)));

  EXPECT_THAT(Placement::Create({{0, 2}}, {{0, 1}}, 2),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("logical expert 1 has no slot")));
  EXPECT_THAT(Placement::Create({{0, 1}}, {{0, 2}}, 2),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("device 2")));
  EXPECT_THAT(Placement::Create({{0, 1}}, {{0, 1}, {0, 1}}, 2),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(Placement::Create({{0, 1}, {0, 1, 2}}, {{0, 1}, {0, 1, 1}}, 2),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("layer 1")));
  EXPECT_THAT(Placement::FromDeviceMajor({{0, 1, 2}}, 2),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("divide")));
  EXPECT_THAT(Placement::FromExpertDevice({0, 1}, 0, 1), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(Placement::FromExpertDevice({0, 1}, 2, 0), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace sy::engine::eplb
