// The rebalance and rebalance_auto commands on a live engine: a skewed
// router and redundant experts, the dry-run plan, the live move with its
// events (planned, one per layer, done, measured), the placement on the
// experts stream, and the refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <vector>

#include "tests/engine/server/engine_fixture.h"

namespace sy::engine {
namespace {

class RebalanceTest : public EngineTest {
 protected:
  EngineOptions SkewedOptions() const {
    EngineOptions o = Options();
    o.runner.router_skew = 1.5;
    o.redundant_experts = 2;  // 8 + 2 slots over 2 devices
    o.workload.burst = true;
    o.workload.max_requests = 16;
    o.workload.ignore_eos = true;
    o.workload.output_len = {LengthDist::Kind::kFixed, 90, 90};
    o.workload.prompt_len = {LengthDist::Kind::kUniform, 8, 24};
    o.scheduler.max_running = 16;
    o.runner.kv_pages_per_device = 128;
    return o;
  }
};

TEST_F(RebalanceTest, DryRunThenLiveMovePublishesEveryPhase) {
  auto engine = Engine::Create(SkewedOptions());
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });

  std::vector<telemetry::Event> events;
  std::set<std::vector<std::vector<int>>> placements;
  size_t slots = 0, balancedness_layers = 0;
  on_message_ = [&](const telemetry::Message& m) {
    if (auto* e = std::get_if<telemetry::Event>(&m); e && e->kind == "rebalance") {
      events.push_back(*e);
    }
    if (auto* x = std::get_if<telemetry::ExpertLoad>(&m); x && !x->phy2log.empty()) {
      placements.insert(x->phy2log);
      slots = x->slot_device.size();
      balancedness_layers = x->balancedness.size();
    }
  };
  ASSERT_TRUE(
      WaitFor(**sub, [&](const auto&) { return StatusStep(Call(**client, "status")) >= 8; }));

  EXPECT_EQ(Call(**client, "rebalance", {{"dry_run", "yes"}}).error_code, "INVALID_ARGUMENT");
  EXPECT_EQ(Call(**client, "rebalance", {{"policy", "best"}}).error_code, "INVALID_ARGUMENT");
  EXPECT_EQ(Call(**client, "rebalance", {{"window", 5000}}).error_code, "INVALID_ARGUMENT");
  telemetry::CommandReply dry = Call(**client, "rebalance", {{"dry_run", true}, {"window", 0}});
  ASSERT_TRUE(dry.ok) << dry.error_message;
  EXPECT_FALSE(dry.result["started"].get<bool>());
  const json plan = dry.result["plan"];
  ASSERT_EQ(plan["layers"].size(), 2u);
  EXPECT_GT(plan["mean_after"].get<double>(), plan["mean_before"].get<double>());
  EXPECT_GT(plan["experts_moved"].get<int>(), 0);

  telemetry::CommandReply live = Call(**client, "rebalance", {{"window", 0}});
  ASSERT_TRUE(live.ok) << live.error_message;
  EXPECT_TRUE(live.result["started"].get<bool>());
  // Serving and commands go on while it moves; it ends with a measurement.
  ASSERT_TRUE(WaitFor(
      **sub, [&](const auto&) { return !events.empty() && events.back().phase == "measured"; }))
      << "events seen: " << events.size();
  std::vector<std::string> phases;
  for (const telemetry::Event& e : events) phases.push_back(e.phase);
  EXPECT_EQ(phases.front(), "planned");
  const auto layers = std::count(phases.begin(), phases.end(), "layer");
  EXPECT_GE(layers, 1);
  const telemetry::Event& done = events[events.size() - 2];
  EXPECT_EQ(done.phase, "done");
  EXPECT_EQ(done.detail["layers"].get<int64_t>(), layers);
  EXPECT_GT(done.detail["experts_moved"].get<int>(), 0);
  EXPECT_GE(done.detail["longest_pause_ms"].get<double>(), 0.0);
  const json measured = events.back().detail;
  EXPECT_GT(measured["balancedness_after"].get<double>(),
            measured["balancedness_before"].get<double>());
  EXPECT_EQ(slots, 10u);
  EXPECT_EQ(balancedness_layers, 2u);
  EXPECT_GE(placements.size(), 2u) << "the experts stream shows the new placement";

  // Auto mode: settable, validated, echoed.
  telemetry::CommandReply a = Call(**client, "rebalance_auto", {{"every", 16}, {"min_gain", 0.1}});
  ASSERT_TRUE(a.ok) << a.error_message;
  EXPECT_EQ(a.result["every"], 16);
  EXPECT_EQ(Call(**client, "rebalance_auto", {{"every", -1}}).error_code, "INVALID_ARGUMENT");
  EXPECT_EQ(Call(**client, "rebalance_auto", {{"min_gain", 2}}).error_code, "INVALID_ARGUMENT");
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
}

// Auto mode plans every N steps and starts a rebalance when the predicted
// gain clears min_gain; the skew makes sure it does.
TEST_F(RebalanceTest, AutoModeStartsARebalanceOnItsOwn) {
  EngineOptions o = SkewedOptions();
  o.rebalance_every = 8;
  o.rebalance_window = 8;
  o.rebalance_min_gain = 0.05;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  bool auto_started = false, done = false;
  on_message_ = [&](const telemetry::Message& m) {
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e == nullptr || e->kind != "rebalance") return;
    if (e->name == "auto" && e->phase == "started") auto_started = true;
    if (e->name == "rebalance" && e->phase == "done") done = true;
  };
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return auto_started && done; }));
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
}

TEST_F(RebalanceTest, UnevenRedundantSlotsAreRefusedAtStart) {
  EngineOptions bad = SkewedOptions();
  bad.redundant_experts = 1;  // 9 slots over 2 devices
  auto refused = Engine::Create(std::move(bad));
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("--redundant-experts"));
}

}  // namespace
}  // namespace sy::engine
