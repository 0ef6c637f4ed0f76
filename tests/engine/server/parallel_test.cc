// The switch, policy and calibrate commands on a live engine: a manual
// switch each way with its events and the new layout in meta and status, an
// injected failure that rolls back, the refusals, the auto policy switching
// on its own as a burst drains, and a calibration run in the background.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/engine/server/engine_fixture.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

class ParallelTest : public EngineTest {
 protected:
  EngineOptions BurstOptions() const {
    EngineOptions o = Options();
    o.workload.burst = true;
    o.workload.max_requests = 12;
    o.workload.ignore_eos = true;
    o.workload.output_len = {LengthDist::Kind::kFixed, 60, 60};
    o.scheduler.max_running = 12;
    o.runner.kv_pages_per_device = 128;
    return o;
  }
};

TEST_F(ParallelTest, ManualSwitchesFaultAndRefusals) {
  EngineOptions o = BurstOptions();
  o.start_paused = true;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  std::vector<telemetry::Event> switches;
  std::string layout;
  on_message_ = [&](const telemetry::Message& m) {
    if (auto* e = std::get_if<telemetry::Event>(&m); e && e->kind == "switch") {
      switches.push_back(*e);
    }
    if (auto* meta = std::get_if<telemetry::Meta>(&m)) layout = meta->layout;
  };
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return layout == "EP"; }));

  EXPECT_EQ(Call(**client, "switch", {{"to", "xp"}}).error_code, "INVALID_ARGUMENT");
  EXPECT_EQ(Call(**client, "switch").error_code, "INVALID_ARGUMENT");
  telemetry::CommandReply tp = Call(**client, "switch", {{"to", "tp"}});
  ASSERT_TRUE(tp.ok) << tp.error_message;
  EXPECT_EQ(tp.result["from"], "EP");
  EXPECT_EQ(tp.result["to"], "TP");
  EXPECT_EQ(tp.result["layers"], 2);
  EXPECT_GT(tp.result["bytes"].get<int64_t>(), 0);
  EXPECT_EQ(Call(**client, "status").result["layout"], "TP");
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return layout == "TP" && !switches.empty(); }));
  EXPECT_EQ(switches.back().phase, "done");
  EXPECT_GT(switches.back().detail["total_ms"].get<double>(), 0.0);
  EXPECT_EQ(Call(**client, "switch", {{"to", "tp"}}).result["layers"], 0);

  // Nothing to balance across devices in TP.
  EXPECT_EQ(Call(**client, "rebalance", {{"window", 0}}).error_code, "FAILED_PRECONDITION");

  // A reshard that fails half-way is rolled back, and serving goes on.
  telemetry::CommandReply bad = Call(
      **client, "switch", {{"to", "ep"}, {"inject_fault", {{"layer", 1}, {"phase", "exchange"}}}});
  EXPECT_EQ(bad.error_code, "UNAVAILABLE") << bad.error_message;
  EXPECT_EQ(Call(**client, "status").result["layout"], "TP");
  ASSERT_TRUE(WaitFor(
      **sub, [&](const auto&) { return !switches.empty() && switches.back().phase == "failed"; }));
  EXPECT_TRUE(switches.back().detail["rolled_back"].get<bool>());

  // With requests in flight under TP: a failure while moving their state
  // rolls back too, then the switch moves it (re-homing first). Serve until
  // some are running, then hold them there: paused, none can finish between
  // the check and the switches (they did once, and the faulted switch found
  // no state to move).
  bool running = false;
  for (int i = 0; i < 500 && !running; ++i) {
    ASSERT_TRUE(Call(**client, "resume").ok);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(Call(**client, "pause").ok);
    running = Call(**client, "status").result["running"].get<int>() > 0;
  }
  ASSERT_TRUE(running);
  telemetry::CommandReply bad_state =
      Call(**client, "switch",
           {{"to", "ep"}, {"inject_fault", {{"part", "state"}, {"phase", "place"}, {"rank", 1}}}});
  EXPECT_EQ(bad_state.error_code, "UNAVAILABLE") << bad_state.error_message;
  EXPECT_THAT(bad_state.error_message, HasSubstr("state reshard"));
  EXPECT_EQ(Call(**client, "status").result["layout"], "TP");
  EXPECT_EQ(Call(**client, "switch", {{"to", "ep"}, {"inject_fault", {{"part", "kv"}}}}).error_code,
            "INVALID_ARGUMENT");
  telemetry::CommandReply ep = Call(**client, "switch", {{"to", "ep"}});
  ASSERT_TRUE(ep.ok) << ep.error_message;
  EXPECT_EQ(ep.result["to"], "EP");
  ASSERT_TRUE(ep.result.contains("rehome")) << ep.result.dump();
  EXPECT_GT(ep.result["rehome"]["requests"].get<int>(), 0);
  EXPECT_GT(ep.result["kv_pages"].get<int>(), 0);
  EXPECT_GT(ep.result["state_bytes"].get<int64_t>(), 0);
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return layout == "EP"; }));
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
  EXPECT_EQ((*engine)->stats().switches, 2);
}

TEST_F(ParallelTest, AutoPolicySwitchesAsTheBurstDrainsAndCalibrateReports) {
  auto engine = Engine::Create(BurstOptions());
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  EXPECT_EQ(Call(**client, "policy", {{"t_high", 0}}).error_code, "INVALID_ARGUMENT");
  EXPECT_EQ(Call(**client, "policy", {{"speed", 1}}).error_code, "INVALID_ARGUMENT");
  telemetry::CommandReply p =
      Call(**client, "policy", {{"mode", "auto"}, {"t_high", 8}, {"window", 4}, {"cooldown", 4}});
  ASSERT_TRUE(p.ok) << p.error_message;
  EXPECT_EQ(p.result["mode"], "auto");
  EXPECT_DOUBLE_EQ(p.result["t_low"].get<double>(), 6.4);
  EXPECT_EQ(Call(**client, "calibrate", {{"batches", {1}}}).error_code, "INVALID_ARGUMENT");
  telemetry::CommandReply cal = Call(**client, "calibrate", {{"batches", {1, 4}}, {"steps", 2}});
  ASSERT_TRUE(cal.ok) << cal.error_message;

  bool policy_switch = false, decision = false;
  nlohmann::json calibrated;
  on_message_ = [&](const telemetry::Message& m) {
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e == nullptr) return;
    if (e->kind == "policy") decision = true;
    if (e->kind == "switch" && e->phase == "done" &&
        e->detail["why"].get<std::string>().rfind("policy", 0) == 0) {
      policy_switch = true;
    }
    if (e->kind == "calibrate" && e->phase == "done") calibrated = e->detail;
  };
  // 12 running >= T_h keeps EP; as requests finish the mean falls below T_l.
  ASSERT_TRUE(WaitFor(
      **sub, [&](const auto&) { return policy_switch && decision && !calibrated.is_null(); }));
  EXPECT_EQ(calibrated["points"].size(), 2u);
  EXPECT_THAT(calibrated["table"].get<std::string>(), HasSubstr("TP"));
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
  EXPECT_GE((*engine)->stats().switches, 1);
}

// The bursty workload under the auto policy: quiet phases drop the batch
// below T_l (to TP), bursts lift it to T_h (back to EP) -- both directions,
// each decided by the policy, with every request served.
TEST_F(ParallelTest, AutoPolicyFollowsTheBurstsBothWays) {
  EngineOptions o = Options();
  o.workload.kind = WorkloadKind::kBursty;
  o.workload.quiet_rate = 5;
  o.workload.burst_rate = 800;
  o.workload.quiet_s = 0.6;
  o.workload.burst_s = 0.2;
  o.workload.duration_s = 2.4;
  o.workload.max_requests = 0;  // the duration bounds it
  o.workload.ignore_eos = true;
  o.workload.output_len = {LengthDist::Kind::kFixed, 48, 48};
  o.workload.prompt_len = {LengthDist::Kind::kUniform, 8, 16};
  o.exit_when_done = true;
  o.scheduler.max_running = 64;
  o.runner.kv_pages_per_device = 512;
  o.policy.mode = PolicyMode::kAuto;
  o.policy.t_high = 12;
  o.policy.window = 4;
  o.policy.cooldown = 4;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  std::vector<std::string> to;
  on_message_ = [&](const telemetry::Message& m) {
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e && e->kind == "switch" && e->phase == "done") {
      EXPECT_EQ(e->detail["why"].get<std::string>().rfind("policy", 0), 0u);
      to.push_back(e->detail["to"].get<std::string>());
    }
  };
  ASSERT_TRUE(WaitFor(**sub,
                      [&](const auto&) {
                        return std::count(to.begin(), to.end(), "TP") >= 1 &&
                               std::count(to.begin(), to.end(), "EP") >= 1;
                      }))
      << "switches seen: " << to.size();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
  EXPECT_EQ((*engine)->stats().rejected, 0);
}

}  // namespace
}  // namespace sy::engine
