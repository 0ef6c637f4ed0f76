// The auto switch policy inside the real Engine on the sim backend: when it
// observes the load, what it counts, and what the layout does with a burst.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/server/sim_flags.h"
#include "tests/engine/server/engine_fixture.h"

namespace sy::engine {
namespace {

// Records each step's prefill and start, and where the first switch to EP
// fell between the steps (the engine publishes a step before it observes
// the policy, so events arrive in serving order).
class BurstObserver final : public EngineObserver {
 public:
  void OnStep(const telemetry::Step& s) override { steps.push_back(s); }
  void OnEvent(const telemetry::Event& e) override {
    if (e.kind == "switch" && e.phase == "done" && e.detail.value("to", "") == "EP" &&
        steps_before_ep < 0) {
      steps_before_ep = static_cast<int>(steps.size());
    }
    if (e.kind == "policy" && e.detail.value("action", "") == "switch_to_ep" &&
        ep_decision.empty()) {
      ep_decision = e.detail;
      ep_reason = e.message;
    }
  }
  std::vector<telemetry::Step> steps;
  int steps_before_ep = -1;  // steps served before the first switch to EP
  nlohmann::json ep_decision;
  std::string ep_reason;
};

// Qwen3-235B-A22B on 8 x H200, starting in TP under the auto policy: 1.5 s
// of a quiet trickle, then 1,000 req/s of 64-token prompts. Arrivals during
// the step at the burst's onset are queued before the policy looks, so it
// switches before TP prefills them; counting only what a step had already
// prefilled, it would switch one TP step later, after prefilling thousands of
// the burst's tokens in TP's narrow expert slices. The queue rule (queue=8,
// the default) sees it at once; with it off, the median over W sees it later.
class SimPolicyTest : public EngineTest {
 protected:
  void RunBurst(int queue, BurstObserver* obs) {
    EngineOptions o;
    o.runner.devices = 8;
    SimFlags f;
    f.backend = "sim";
    f.hardware = "h200";
    f.max_seq = 4096;
    ASSERT_THAT(ApplySimFlags(f, "qwen3-235b-a22b", 7, &o), IsOk());
    o.workload.kind = WorkloadKind::kBursty;
    o.workload.phases = {{.seconds = 1.5, .rate = 4}, {.seconds = 0.3, .rate = 1000}};
    o.workload.max_requests = 0;
    o.workload.ignore_eos = true;
    o.workload.prompt_len = {LengthDist::Kind::kFixed, 64, 64};
    o.workload.output_len = {LengthDist::Kind::kFixed, 32, 32};
    o.scheduler.max_running = 1024;
    o.scheduler.max_batch_tokens = 8192;
    o.initial_layout = ParallelMode::kTP;
    o.policy.mode = PolicyMode::kAuto;
    o.policy.t_high = 256;
    o.policy.window = 4;  // short, so that the median alone can also catch the onset
    o.policy.cooldown = 1000;
    o.policy.queue = queue;
    o.exit_when_done = true;
    o.publisher.endpoint = pub_;
    o.control_endpoint = ctl_;
    o.observer = obs;
    auto engine = Engine::Create(std::move(o));
    ASSERT_THAT(engine.status(), IsOk());
    ASSERT_THAT((*engine)->Run(), IsOk());

    ASSERT_GT(obs->steps_before_ep, 0) << "never switched to EP";
    ASSERT_GT(obs->steps.size(), static_cast<size_t>(obs->steps_before_ep));
    ASSERT_FALSE(obs->ep_decision.empty());
    EXPECT_GT((*engine)->stats().finished, 250);  // ~300 in the burst, all served
  }
  // TP steps that prefilled the burst: those before the switch that took
  // more than the few prompts a quiet step finds (a quiet step is ~20 ms:
  // ~20 arrivals at the onset).
  static int BurstStepsInTp(const BurstObserver& obs) {
    int n = 0;
    for (int i = 0; i < obs.steps_before_ep; ++i) n += obs.steps[i].prefill_tokens > 32 * 64;
    return n;
  }
};

TEST_F(SimPolicyTest, QueueRuleSeesArrivalsBeforeTheyArePrefilledInTp) {
  BurstObserver obs;
  RunBurst(8, &obs);
  EXPECT_EQ(obs.ep_decision.value("why", ""), "queued");
  // Every prompt past the step in flight at the onset waits for EP, and the
  // decision saw the queue the burst built during that step.
  EXPECT_EQ(BurstStepsInTp(obs), 0);
  EXPECT_GT(obs.steps[obs.steps_before_ep].prefill_tokens, 4096);  // the burst, in EP
  EXPECT_GT(obs.ep_decision["waiting"].get<int>(), 32);
}

// Without the queue rule the median over W steps still catches the burst,
// once half the window has seen it: W/2 TP steps prefill part of it. That
// is the price of a median, which ignores a few long prompts in quiet
// stretches (SwitchPolicyTest.AFewLongPromptsInTheWindowDoNotMoveTpToEp).
TEST_F(SimPolicyTest, MedianRuleCatchesTheBurstWithinHalfTheWindow) {
  BurstObserver obs;
  RunBurst(0, &obs);
  EXPECT_EQ(obs.ep_decision.value("why", ""), "above_high");
  EXPECT_THAT(obs.ep_reason, testing::StartsWith("median batch "));
  EXPECT_GE(obs.ep_decision.value("median", 0.0), 256.0);
  EXPECT_GE(BurstStepsInTp(obs), 1);
  EXPECT_LE(BurstStepsInTp(obs), 2);  // W = 4
}

}  // namespace
}  // namespace sy::engine
