// The auto switch policy inside the real Engine on the sim backend: when it
// observes the load, what it counts, and what the layout does with a burst.
#include <algorithm>
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
    if (e.kind == "policy" && e.detail.value("action", "") == "switch_to_ep" && ep_decision.empty())
      ep_decision = e.detail;
  }
  std::vector<telemetry::Step> steps;
  int steps_before_ep = -1;  // steps served before the first switch to EP
  nlohmann::json ep_decision;
};

// Qwen3-235B-A22B on 8 x H200, starting in TP under the auto policy: 1.5 s
// of a quiet trickle, then 1,000 req/s of 64-token prompts. Arrivals during
// the step at the burst's onset are queued before the policy looks, so it
// switches before TP prefills them; counting only what a step had already
// prefilled, it would switch one TP step later, after prefilling thousands of
// the burst's tokens in TP's narrow expert slices. Both burst rules see it:
// the queue (queue=8, the default) and, with it off, the mean over W.
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
    o.policy.window = 4;  // short, so that the mean alone can also catch the onset
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
    // The step in flight at the onset may take the few prompts that arrived
    // during the step before it (a quiet step is ~20 ms: ~20 arrivals); every
    // later one waits for EP.
    int most_in_tp = 0;
    for (int i = 0; i < obs->steps_before_ep; ++i)
      most_in_tp = std::max(most_in_tp, obs->steps[i].prefill_tokens);
    EXPECT_LE(most_in_tp, 32 * 64);
    ASSERT_GT(obs->steps.size(), static_cast<size_t>(obs->steps_before_ep));
    EXPECT_GT(obs->steps[obs->steps_before_ep].prefill_tokens, 4096);  // the burst, in EP
    // The decision saw the queue the burst built during that step.
    ASSERT_FALSE(obs->ep_decision.empty());
    EXPECT_GT(obs->ep_decision["waiting"].get<int>(), 32);
    EXPECT_GT((*engine)->stats().finished, 250);  // ~300 in the burst, all served
  }
};

TEST_F(SimPolicyTest, QueueRuleSeesArrivalsBeforeTheyArePrefilledInTp) {
  BurstObserver obs;
  RunBurst(8, &obs);
  EXPECT_EQ(obs.ep_decision.value("why", ""), "queued");
}

TEST_F(SimPolicyTest, MeanRuleSeesArrivalsBeforeTheyArePrefilledInTp) {
  BurstObserver obs;
  RunBurst(0, &obs);
  EXPECT_EQ(obs.ep_decision.value("why", ""), "above_high");
  EXPECT_GE(obs.ep_decision.value("mean", 0.0), 256.0);
}

}  // namespace
}  // namespace sy::engine
