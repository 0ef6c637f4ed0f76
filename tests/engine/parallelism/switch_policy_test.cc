#include "engine/parallelism/switch_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

PolicyOptions Small(int t_high, int window, int cooldown) {
  PolicyOptions o;
  o.t_high = t_high;
  o.window = window;
  o.cooldown = cooldown;
  return o;
}

// prefill: prompt tokens waiting, which count in the step's batch.
PolicyObservation Obs(int64_t step, int running, PolicyLayout layout, int prefill = 0) {
  PolicyObservation o;
  o.step = step;
  o.running = running;
  o.layout = layout;
  o.prefill_tokens = prefill;
  return o;
}

constexpr PolicyLayout kTp = PolicyLayout::kTp;
constexpr PolicyLayout kEp = PolicyLayout::kEp;

TEST(SwitchPolicyTest, SwitchesTpToEpImmediatelyAtTHigh) {
  SwitchPolicy p(Small(10, 4, 0));
  Decision d = p.Observe(Obs(0, 9, kTp));
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kBelowHigh);
  EXPECT_EQ(d.reason, "TP: batch 9 < T_h 10: stay");
  d = p.Observe(Obs(1, 10, kTp));  // one step at T_h is enough: no window on the way up
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_EQ(d.why, DecisionWhy::kAboveHigh);
  EXPECT_EQ(d.reason, "batch 10 >= T_h 10: switch to EP now");
  EXPECT_EQ(d.step, 1);
  EXPECT_EQ(d.batch, 10);
  EXPECT_EQ(d.t_high, 10);
  EXPECT_DOUBLE_EQ(d.t_low, 8.0);
  EXPECT_FALSE(d.repeat);
}

// Prompt tokens waiting to be prefilled count in a step's batch: a load of
// prompts moves TP to EP on the median over W steps, before enough requests
// run to cross T_h; a single long prompt in a quiet stretch does not.
TEST(SwitchPolicyTest, PromptTokensMoveTpToEpOnTheMedianOverTheWindow) {
  SwitchPolicy p(Small(150, 4, 0));
  auto step = [&](int64_t s, int running, int prefill) {
    return p.Observe(Obs(s, running, kTp, prefill));
  };
  // Quiet: 20 running, one 300-token prompt among them: median 20 (mean 95).
  EXPECT_EQ(step(0, 20, 0).action, SwitchAction::kNone);
  EXPECT_EQ(step(1, 20, 0).action, SwitchAction::kNone);
  Decision d = step(2, 20, 300);  // window not yet full
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_DOUBLE_EQ(d.median, 20);  // of the 3 steps seen: 20 20 320
  d = step(3, 20, 0);
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kBelowHigh);
  // A burst: ~150 prompt tokens wait at every step while only 25-30 run.
  EXPECT_EQ(step(4, 25, 145).action, SwitchAction::kNone);  // median of 20 20 170 320: 95
  d = step(5, 30, 150);                                     // median of 20 170 180 320: 175
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_EQ(d.why, DecisionWhy::kAboveHigh);
  EXPECT_EQ(d.reason, "median batch 175 over 4 steps >= T_h 150: switch to EP now");
  EXPECT_EQ(d.batch, 30);
  EXPECT_EQ(d.window, 4);
  EXPECT_EQ(d.window_filled, 4);
  EXPECT_DOUBLE_EQ(d.mean, 172.5);
  EXPECT_DOUBLE_EQ(d.median, 175);

  // Without prompt tokens the step's batch is its running count.
  SwitchPolicy q(Small(100, 4, 0));
  for (int s = 0; s < 4; ++s) EXPECT_EQ(q.Observe(Obs(s, 99, kTp)).action, SwitchAction::kNone);
}

// A few long prompts among decode steps lift the window's mean past T_h
// while most steps stay far below it, where TP is the faster layout: the
// median keeps TP (moebius-bursty's 3 s EP excursion after burst-80).
TEST(SwitchPolicyTest, AFewLongPromptsInTheWindowDoNotMoveTpToEp) {
  SwitchPolicy p(Small(150, 4, 0));
  auto step = [&](int64_t s, int running, int prefill) {
    return p.Observe(Obs(s, running, kTp, prefill));
  };
  step(0, 20, 0);
  step(1, 20, 0);
  step(2, 20, 0);
  Decision d = step(3, 20, 580);  // mean (3 x 20 + 600) / 4 = 165, median 20
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kBelowHigh);
  EXPECT_DOUBLE_EQ(d.mean, 165);
  EXPECT_DOUBLE_EQ(d.median, 20);
  d = step(4, 20, 400);  // half the steps long: median (20 + 420) / 2 = 220
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_EQ(d.reason, "median batch 220 over 4 steps >= T_h 150: switch to EP now");
}

// A burst queues many requests at once: with Q of them waiting and the
// step's batch at T_h, TP goes to EP on that step, before it prefills them.
// A few queued requests, or many short ones below T_h, do not.
TEST(SwitchPolicyTest, AQueueOfRequestsAtTHighMovesTpToEpAtOnce) {
  PolicyOptions o = Small(150, 64, 0);
  o.queue = 8;
  SwitchPolicy p(o);
  auto step = [&](int64_t s, int running, int waiting, int prefill) {
    PolicyObservation obs = Obs(s, running, kTp, prefill);
    obs.waiting = waiting;
    return p.Observe(obs);
  };
  // One long prompt queued alone: far past T_h in tokens, but no burst.
  Decision d = step(0, 40, 1, 3000);
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kBelowHigh);
  // Seven queued: one short of Q.
  EXPECT_EQ(step(1, 40, 7, 2000).action, SwitchAction::kNone);
  // Eight queued whose prompts keep the batch under T_h: 40 + 100 < 150.
  EXPECT_EQ(step(2, 40, 8, 100).action, SwitchAction::kNone);
  d = step(3, 40, 8, 110);  // 40 + 110 = 150
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_EQ(d.why, DecisionWhy::kQueued);
  EXPECT_EQ(WhyName(d.why), "queued");
  EXPECT_EQ(d.reason, "8 queued, batch 40 + 110 prompt tokens >= T_h 150: switch to EP now");
  EXPECT_EQ(d.waiting, 8);
  EXPECT_EQ(d.window_filled, 4);  // the mean rule's window (64) was far from full

  // The cooldown holds it back like any other rule; queue=0 turns it off.
  PolicyOptions c = Small(150, 64, 10);
  c.queue = 8;
  SwitchPolicy held(c);
  PolicyObservation obs = Obs(0, 40, kEp);
  (void)held.Observe(obs);  // layout EP, then TP: a switch seen at step 1
  obs = Obs(1, 40, kTp);
  (void)held.Observe(obs);
  obs = Obs(2, 40, kTp);
  obs.waiting = 20;
  obs.prefill_tokens = 2000;
  d = held.Observe(obs);
  EXPECT_EQ(d.why, DecisionWhy::kCooldown);
  EXPECT_EQ(d.reason,
            "20 queued, batch 40 + 2000 prompt tokens >= T_h 150 but cooldown 9 steps left");
  ASSERT_THAT(p.ApplyCommand("queue=0"), IsOk());
  obs = Obs(4, 40, kTp);
  obs.waiting = 50;
  obs.prefill_tokens = 5000;
  d = p.Observe(obs);  // the mean over 5 of 64 steps: the window is not full
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kBelowHigh);
}

// EP -> TP averages the same batches over the whole window.
TEST(SwitchPolicyTest, ReturnToTpAveragesBatchesWithPromptTokens) {
  SwitchPolicy p(Small(100, 4, 0));  // T_l 80
  auto step = [&](int64_t s, int running, int prefill) {
    return p.Observe(Obs(s, running, kEp, prefill));
  };
  // 50 running, but a waiting prompt keeps the mean at (50 + 50 + 250 + 50) / 4 = 100.
  step(0, 50, 0);
  step(1, 50, 0);
  step(2, 50, 200);
  Decision d = step(3, 50, 0);
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kAboveLow);
  d = step(4, 50, 0);  // (50 + 250 + 50 + 50) / 4 = 100
  EXPECT_EQ(d.action, SwitchAction::kNone);
  step(5, 50, 0);
  d = step(6, 50, 0);  // the prompt has left the window: 50
  EXPECT_EQ(d.action, SwitchAction::kSwitchToTp);
  EXPECT_DOUBLE_EQ(d.mean, 50);
}

TEST(SwitchPolicyTest, ReturnsToTpOnlyWhenWindowMeanFallsBelowTLow) {
  SwitchPolicy p(Small(10, 4, 0));  // T_l = 8
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(p.Observe(Obs(s, 12, kEp)).action, SwitchAction::kNone);
  }
  // A single dip to 0: the mean (12+12+12+0)/4 = 9 stays above T_l.
  Decision d = p.Observe(Obs(4, 0, kEp));
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kAboveLow);
  EXPECT_DOUBLE_EQ(d.mean, 9.0);
  EXPECT_EQ(d.reason, "EP: mean batch 9 over 4 steps >= T_l 8: stay");
  for (int s = 5; s < 8; ++s) {  // back to 12: the dip leaves the window
    EXPECT_EQ(p.Observe(Obs(s, 12, kEp)).action, SwitchAction::kNone);
  }
  // Sustained quiet at 6: 12,12,12,6 = 10.5 and 12,12,6,6 = 9 stay ...
  EXPECT_EQ(p.Observe(Obs(8, 6, kEp)).action, SwitchAction::kNone);
  EXPECT_EQ(p.Observe(Obs(9, 6, kEp)).action, SwitchAction::kNone);
  // ... until 12,6,6,6 = 7.5 < 8.
  d = p.Observe(Obs(10, 6, kEp));
  EXPECT_EQ(d.action, SwitchAction::kSwitchToTp);
  EXPECT_EQ(d.why, DecisionWhy::kBelowLow);
  EXPECT_EQ(d.reason, "mean batch 7.5 over 4 steps < T_l 8: switch to TP now");
  EXPECT_EQ(d.window, 4);
  EXPECT_EQ(d.window_filled, 4);
}

TEST(SwitchPolicyTest, EpStaysWhileWindowFills) {
  SwitchPolicy p(Small(10, 4, 0));
  for (int s = 0; s < 3; ++s) {
    Decision d = p.Observe(Obs(s, 0, kEp));
    EXPECT_EQ(d.action, SwitchAction::kNone);
    EXPECT_EQ(d.why, DecisionWhy::kWindowFilling);
    EXPECT_EQ(d.window_filled, s + 1);
  }
  EXPECT_EQ(p.Observe(Obs(3, 0, kEp)).action, SwitchAction::kSwitchToTp);
}

TEST(SwitchPolicyTest, HysteresisBandPreventsOscillation) {
  // A load hovering between T_l (8) and T_h (10), as in §7.2: one switch to
  // EP, then it stays there. Without the band it would flip every step.
  SwitchPolicy p(Small(10, 4, 0));
  PolicyLayout layout = kTp;
  int switches = 0;
  for (int s = 0; s < 200; ++s) {
    const int running = s % 2 == 0 ? 11 : 8;
    Decision d = p.Observe(Obs(s, running, layout));
    if (d.action == SwitchAction::kSwitchToEp) layout = kEp;
    if (d.action == SwitchAction::kSwitchToTp) layout = kTp;
    switches += d.action != SwitchAction::kNone ? 1 : 0;
  }
  EXPECT_EQ(switches, 1);
  EXPECT_EQ(layout, kEp);
}

TEST(SwitchPolicyTest, CooldownHoldsBackTheNextSwitch) {
  SwitchPolicy p(Small(10, 1, 5));
  EXPECT_EQ(p.Observe(Obs(0, 20, kTp)).action, SwitchAction::kSwitchToEp);
  // The caller did not act (say the switch failed and rolled back): no retry
  // storm, the cooldown counts from the decision.
  Decision d = p.Observe(Obs(1, 20, kTp));
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kCooldown);
  EXPECT_EQ(d.cooldown_left, 4);
  EXPECT_EQ(d.reason, "batch 20 >= T_h 10 but cooldown 4 steps left");
  EXPECT_EQ(p.Observe(Obs(4, 20, kTp)).reason, "batch 20 >= T_h 10 but cooldown 1 step left");
  EXPECT_EQ(p.Observe(Obs(5, 20, kTp)).action, SwitchAction::kSwitchToEp);

  // A layout change the policy did not decide (a manual `switch`) also
  // starts the cooldown, from the step it is seen.
  EXPECT_EQ(p.Observe(Obs(20, 20, kTp)).action, SwitchAction::kSwitchToEp);
  d = p.Observe(Obs(30, 0, kEp));  // switched at step 30 (observed), quiet now
  EXPECT_EQ(d.why, DecisionWhy::kCooldown);
  EXPECT_EQ(d.cooldown_left, 5);
  EXPECT_EQ(d.reason, "mean batch 0 over 1 step < T_l 8 but cooldown 5 steps left");
  EXPECT_EQ(p.Observe(Obs(35, 0, kEp)).action, SwitchAction::kSwitchToTp);
}

TEST(SwitchPolicyTest, NoCooldownBeforeTheFirstSwitch) {
  SwitchPolicy p(Small(10, 1, 1000));
  Decision d = p.Observe(Obs(0, 10, kTp));
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_EQ(d.cooldown_left, 0);
}

TEST(SwitchPolicyTest, CapacityCheckRefusesTheSwitch) {
  SwitchPolicy p(Small(10, 1, 0));
  PolicyObservation o = Obs(0, 300, kTp);
  o.other_layout_fits = false;
  Decision d = p.Observe(o);
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kCapacity);
  EXPECT_EQ(d.reason, "capacity: EP cannot hold 300 requests (batch 300 >= T_h 10)");
  // A refusal is not a switch: nothing to cool down from, so it goes as
  // soon as the requests fit.
  o.step = 1;
  o.other_layout_fits = true;
  EXPECT_EQ(p.Observe(o).action, SwitchAction::kSwitchToEp);

  o = Obs(2, 1, kEp);
  o.other_layout_fits = false;
  d = p.Observe(o);
  EXPECT_EQ(d.why, DecisionWhy::kCapacity);
  EXPECT_EQ(d.reason, "capacity: TP cannot hold 1 request (mean batch 1 over 1 step < T_l 8)");
}

TEST(SwitchPolicyTest, ManualModeReportsButNeverSwitches) {
  PolicyOptions o;  // paper defaults: T_h 256, T_l 204.8
  o.mode = PolicyMode::kManual;
  SwitchPolicy p(o);
  Decision d = p.Observe(Obs(0, 300, kTp));
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kManual);
  EXPECT_EQ(d.reason, "manual: batch 300 (T_h 256, T_l 204.8)");
  for (int s = 1; s < 100; ++s) {
    EXPECT_EQ(p.Observe(Obs(s, 0, kEp)).action, SwitchAction::kNone);
  }
}

TEST(SwitchPolicyTest, NoDecisionWhileATransitionRuns) {
  SwitchPolicy p(Small(10, 1, 0));
  PolicyObservation o = Obs(0, 50, kTp);
  o.transition_in_progress = true;
  Decision d = p.Observe(o);
  EXPECT_EQ(d.action, SwitchAction::kNone);
  EXPECT_EQ(d.why, DecisionWhy::kInProgress);
  EXPECT_EQ(d.reason, "switch or rebalance in progress: batch 50, no decision");
}

TEST(SwitchPolicyTest, RolloutVariantReturnsToTpAsSoonAsBatchDropsBelowTHigh) {
  PolicyOptions opts = Small(10, 64, 0);
  SwitchPolicy p(opts);  // rollout=auto
  PolicyObservation o = Obs(0, 10, kEp);
  o.rollout = true;
  Decision d = p.Observe(o);
  EXPECT_EQ(d.why, DecisionWhy::kAboveLow);
  EXPECT_TRUE(d.rollout);
  EXPECT_EQ(d.reason, "EP (rollout): batch 10 >= T_h 10: stay");
  o.step = 1;
  o.running = 9;  // no window: W = 1, T_l = T_h
  d = p.Observe(o);
  EXPECT_EQ(d.action, SwitchAction::kSwitchToTp);
  EXPECT_EQ(d.reason, "rollout: batch 9 < T_h 10: switch to TP now");
  EXPECT_EQ(d.window, 1);
  EXPECT_DOUBLE_EQ(d.t_low, 10.0);

  // rollout=off ignores the flag: the 64-step window applies.
  opts.rollout = RolloutVariant::kOff;
  SwitchPolicy off(opts);
  o.step = 0;
  d = off.Observe(o);
  EXPECT_EQ(d.why, DecisionWhy::kWindowFilling);
  EXPECT_FALSE(d.rollout);
  // rollout=on applies without the flag.
  opts.rollout = RolloutVariant::kOn;
  SwitchPolicy on(opts);
  EXPECT_EQ(on.Observe(Obs(0, 9, kEp)).action, SwitchAction::kSwitchToTp);
}

TEST(SwitchPolicyTest, SameIntentIsFlaggedAsRepeat) {
  SwitchPolicy p(Small(10, 1, 3));
  Decision d = p.Observe(Obs(0, 3, kTp));
  EXPECT_FALSE(d.repeat);
  d = p.Observe(Obs(1, 4, kTp));  // same intent, other figures
  EXPECT_EQ(d.reason, "TP: batch 4 < T_h 10: stay");
  EXPECT_TRUE(d.repeat);
  d = p.Observe(Obs(2, 12, kTp));
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_FALSE(d.repeat);
  d = p.Observe(Obs(3, 12, kTp));
  EXPECT_EQ(d.why, DecisionWhy::kCooldown);
  EXPECT_FALSE(d.repeat);  // new intent
  d = p.Observe(Obs(4, 12, kTp));
  EXPECT_EQ(d.cooldown_left, 1);
  EXPECT_TRUE(d.repeat);  // the countdown alone is no news
  d = p.Observe(Obs(5, 12, kTp));
  EXPECT_EQ(d.action, SwitchAction::kSwitchToEp);
  EXPECT_FALSE(d.repeat);  // a switch is never a repeat
  // Changing the options makes the next decision news.
  EXPECT_FALSE(p.Observe(Obs(9, 12, kEp)).repeat);  // new layout
  EXPECT_TRUE(p.Observe(Obs(10, 12, kEp)).repeat);
  ASSERT_THAT(p.ApplyCommand("t_high=11"), IsOk());
  EXPECT_FALSE(p.Observe(Obs(11, 12, kEp)).repeat);
}

TEST(SwitchPolicyTest, ValidatesOptionsNamingTheField) {
  PolicyOptions o;
  EXPECT_THAT(ValidatePolicyOptions(o), IsOk());
  o.t_high = 0;
  EXPECT_THAT(SwitchPolicy::Create(o),
              StatusIs(StatusCode::kInvalidArgument, "policy: t_high 0 must be >= 1"));
  o = PolicyOptions{};
  o.t_low = 300;
  EXPECT_THAT(ValidatePolicyOptions(o),
              StatusIs(StatusCode::kInvalidArgument, "policy: t_low 300 must be <= t_high 256"));
  o.t_low = 0;
  EXPECT_THAT(ValidatePolicyOptions(o),
              StatusIs(StatusCode::kInvalidArgument, "policy: t_low 0 must be > 0"));
  o.t_low = 256;  // T_l = T_h is allowed (no band, as in the rollout variant)
  EXPECT_THAT(ValidatePolicyOptions(o), IsOk());
  o = PolicyOptions{};
  o.window = 0;
  EXPECT_THAT(ValidatePolicyOptions(o), StatusIs(StatusCode::kInvalidArgument,
                                                 "policy: window 0 must be in [1, 1000000] steps"));
  o = PolicyOptions{};
  o.cooldown = -1;
  EXPECT_THAT(ValidatePolicyOptions(o),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("policy: cooldown -1 must be")));
}

TEST(SwitchPolicyTest, PolicyCommandSetsEveryKey) {
  SwitchPolicy p(PolicyOptions{});
  EXPECT_EQ(DescribePolicyOptions(p.options()),
            "mode=auto t_high=256 t_low=204.8 (0.8 t_high) window=64 cooldown=50 queue=8 "
            "rollout=auto");
  ASSERT_THAT(p.ApplyCommand("t_high=64 window=32, cooldown=7 queue=3 rollout=on manual"), IsOk());
  EXPECT_EQ(p.options().t_high, 64);
  EXPECT_DOUBLE_EQ(EffectiveTLow(p.options()), 51.2);  // T_l follows T_h while unset
  EXPECT_EQ(p.options().window, 32);
  EXPECT_EQ(p.options().cooldown, 7);
  EXPECT_EQ(p.options().queue, 3);
  EXPECT_EQ(p.options().rollout, RolloutVariant::kOn);
  EXPECT_EQ(p.options().mode, PolicyMode::kManual);
  ASSERT_THAT(p.ApplyCommand("mode=auto t_low=40.5 rollout=off"), IsOk());
  EXPECT_EQ(DescribePolicyOptions(p.options()),
            "mode=auto t_high=64 t_low=40.5 window=32 cooldown=7 queue=3 rollout=off");
  ASSERT_THAT(p.ApplyCommand("t_low=auto"), IsOk());
  EXPECT_FALSE(p.options().t_low.has_value());
  ASSERT_THAT(p.ApplyCommand(""), IsOk());
  EXPECT_EQ(p.options().t_high, 64);
}

TEST(SwitchPolicyTest, PolicyCommandRejectsBadInputAndChangesNothing) {
  SwitchPolicy p(PolicyOptions{});
  const std::string before = DescribePolicyOptions(p.options());
  EXPECT_THAT(p.ApplyCommand("window=8 foo=1"),
              StatusIs(StatusCode::kInvalidArgument,
                       "policy: unknown key 'foo' (keys: mode, t_high, t_low, window, cooldown, "
                       "queue, rollout)"));
  EXPECT_THAT(p.ApplyCommand("t_high=abc"),
              StatusIs(StatusCode::kInvalidArgument,
                       "policy: bad value 'abc' for t_high: want an integer batch size"));
  EXPECT_THAT(p.ApplyCommand("t_high=12.5"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad value '12.5' for t_high")));
  EXPECT_THAT(p.ApplyCommand("window="),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad value '' for window")));
  EXPECT_THAT(p.ApplyCommand("mode=sometimes"),
              StatusIs(StatusCode::kInvalidArgument,
                       "policy: bad value 'sometimes' for mode: want manual or auto"));
  EXPECT_THAT(
      p.ApplyCommand("rollout=maybe"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("for rollout: want auto, on or off")));
  EXPECT_THAT(p.ApplyCommand("t_low=nan"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad value 'nan' for t_low")));
  EXPECT_THAT(p.ApplyCommand("sometimes"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'sometimes' is not key=value")));
  // Each value parses but together they break T_l <= T_h: all or nothing.
  EXPECT_THAT(p.ApplyCommand("window=8 t_low=50 t_high=40"),
              StatusIs(StatusCode::kInvalidArgument, "policy: t_low 50 must be <= t_high 40"));
  EXPECT_THAT(p.ApplyCommand("cooldown=-3"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("policy: cooldown -3")));
  EXPECT_THAT(p.ApplyCommand("queue=-1"),
              StatusIs(StatusCode::kInvalidArgument,
                       "policy: queue -1 must be in [0, 1000000] requests (0: off)"));
  EXPECT_THAT(p.ApplyCommand("queue=many"),
              StatusIs(StatusCode::kInvalidArgument,
                       "policy: bad value 'many' for queue: want an integer request count"));
  EXPECT_EQ(DescribePolicyOptions(p.options()), before);
}

TEST(SwitchPolicyTest, ShrinkingTheWindowKeepsTheNewestCounts) {
  SwitchPolicy p(Small(10, 4, 0));
  for (int s = 0; s < 4; ++s) (void)p.Observe(Obs(s, s == 3 ? 0 : 20, kEp));  // 20,20,20,0
  ASSERT_THAT(p.ApplyCommand("window=2"), IsOk());
  Decision d = p.Observe(Obs(4, 0, kEp));  // window now 0,0
  EXPECT_DOUBLE_EQ(d.mean, 0.0);
  EXPECT_EQ(d.action, SwitchAction::kSwitchToTp);
}

}  // namespace
}  // namespace sy::engine
