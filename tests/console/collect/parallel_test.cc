// TP <-> EP switching in the collector: layout and policy from meta, the
// switch timeline, policy decisions, calibration, and the Log's wording.
#include "console/collect/parallel_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/collect/collector.h"

namespace sy::console {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kS = 1'000'000;

telemetry::Envelope Env(uint64_t seq, int64_t t_us) {
  telemetry::Envelope e;
  e.run = "r1";
  e.seq = seq;
  e.t_us = t_us;
  return e;
}

telemetry::Meta MetaWith(uint64_t seq, const std::string& layout, nlohmann::json policy) {
  telemetry::Meta m;
  m.env = Env(seq, 0);
  m.devices = 2;
  m.layout = layout;
  m.policy = std::move(policy);
  return m;
}

telemetry::Step StepAt(uint64_t seq, int64_t t_us, int running) {
  telemetry::Step s;
  s.env = Env(seq, t_us);
  s.step = static_cast<int64_t>(seq);
  s.batch_requests = running;
  s.running = running;
  return s;
}

telemetry::Event Ev(uint64_t seq, int64_t t_us, std::string kind, std::string name,
                    std::string phase, nlohmann::json detail, std::string message = "") {
  telemetry::Event e;
  e.env = Env(seq, t_us);
  e.kind = std::move(kind);
  e.name = std::move(name);
  e.phase = std::move(phase);
  e.detail = std::move(detail);
  e.message = std::move(message);
  return e;
}

nlohmann::json DoneDetail(const char* from, const char* to) {
  return {
      {"from", from},         {"to", to},           {"layers", 4},          {"weights_ms", 10.1},
      {"permute_ms", 1.2},    {"exchange_ms", 6.0}, {"place_ms", 2.9},      {"state_ms", 1.5},
      {"kv_pages", 12},       {"state_slots", 3},   {"state_bytes", 98304}, {"other_ms", 2.4},
      {"rollback_ms", 0.0},   {"total_ms", 12.5},   {"bytes", 36 << 20},    {"gbps", 7.9},
      {"rolled_back", false}, {"why", "command"}};
}

const nlohmann::json kPolicy = {
    {"mode", "auto"}, {"t_high", 64},
    {"t_low", 51.2},  {"t_low_auto", true},
    {"window", 32},   {"cooldown", 16},
    {"queue", 8},     {"rollout", "auto"},
    {"layout", "ep"}, {"describe", "auto: TP->EP at batch >= 64, EP->TP below 51.2"}};

std::vector<std::string> LogTexts(const Snapshot& s) {
  std::vector<std::string> out;
  for (const LogLine& l : s.log) out.push_back(l.text);
  return out;
}

TEST(ConsoleParallel, MetaCarriesLayoutAndPolicy) {
  Collector c;
  c.Consume(MetaWith(1, "TP", kPolicy));
  Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.parallel.layout, "TP");
  const SwitchPolicy& p = s.parallel.policy;
  ASSERT_TRUE(p.known);
  EXPECT_EQ(p.mode, "auto");
  EXPECT_EQ(p.t_high, 64);
  EXPECT_DOUBLE_EQ(p.t_low, 51.2);
  EXPECT_TRUE(p.t_low_auto);
  EXPECT_EQ(p.window, 32);
  EXPECT_EQ(p.cooldown, 16);
  EXPECT_EQ(p.queue, 8);
  EXPECT_EQ(p.rollout, "auto");
  EXPECT_THAT(p.describe, HasSubstr("TP->EP at batch >= 64"));

  // A re-sent meta after a `policy` command replaces the values.
  nlohmann::json changed = kPolicy;
  changed["mode"] = "manual";
  changed["t_high"] = 32;
  c.Consume(MetaWith(2, "EP", changed));
  s = c.TakeSnapshot();
  EXPECT_EQ(s.parallel.layout, "EP");
  EXPECT_EQ(s.parallel.policy.mode, "manual");
  EXPECT_EQ(s.parallel.policy.t_high, 32);
}

TEST(ConsoleParallel, OlderEngineWithoutPolicyLeavesItUnknown) {
  Collector c;
  c.Consume(MetaWith(1, "EP", nlohmann::json::object()));
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.parallel.layout, "EP");
  EXPECT_FALSE(s.parallel.policy.known);
}

TEST(ConsoleParallel, PolicyReplyUpdatesThePolicyAtOnce) {
  Collector c;
  c.Consume(MetaWith(1, "EP", kPolicy));
  nlohmann::json reply = kPolicy;
  reply["t_high"] = 16;
  reply["t_low"] = 8.0;
  reply["t_low_auto"] = false;
  c.ApplyCommandResult("policy", reply);
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.parallel.policy.t_high, 16);
  EXPECT_DOUBLE_EQ(s.parallel.policy.t_low, 8.0);
  EXPECT_FALSE(s.parallel.policy.t_low_auto);
  EXPECT_EQ(ParallelReplyText("policy", reply), kPolicy["describe"].get<std::string>());
}

TEST(ConsoleParallel, SwitchTimelineKeepsStepTimeAndOutcome) {
  Collector c;
  c.Consume(MetaWith(1, "EP", kPolicy));
  c.Consume(StepAt(10, 5 * kS, 3));
  c.Consume(Ev(1, 5 * kS + 100, "switch", "switch", "done", DoneDetail("EP", "TP")));
  c.Consume(StepAt(20, 9 * kS, 80));
  nlohmann::json failed = {{"from", "TP"},
                           {"to", "EP"},
                           {"error", "injected fault at layer 1 (exchange)"},
                           {"rolled_back", true},
                           {"why", "policy: batch 80 >= T_h 64"}};
  c.Consume(Ev(2, 9 * kS + 50, "switch", "switch", "failed", failed));
  nlohmann::json refused = failed;
  refused["rolled_back"] = false;
  refused["error"] = "a rebalance is in progress";
  c.Consume(Ev(3, 9 * kS + 60, "switch", "switch", "refused", refused));
  const Snapshot s = c.TakeSnapshot();
  const ParallelStatus& p = s.parallel;
  ASSERT_EQ(p.switches.size(), 3u);
  EXPECT_EQ(p.switches[0].phase, "done");
  EXPECT_EQ(p.switches[0].step, 10);
  EXPECT_EQ(p.switches[0].t_us, 5 * kS + 100);
  EXPECT_EQ(p.switches[0].from, "EP");
  EXPECT_EQ(p.switches[0].to, "TP");
  EXPECT_DOUBLE_EQ(p.switches[0].total_ms, 12.5);
  EXPECT_EQ(p.switches[1].phase, "failed");
  EXPECT_EQ(p.switches[1].step, 20);
  EXPECT_TRUE(p.switches[1].rolled_back);
  EXPECT_EQ(p.switches[1].why, "injected fault at layer 1 (exchange)");
  EXPECT_EQ(p.switches[2].phase, "refused");
  EXPECT_EQ(p.switches_done, 1);
  EXPECT_EQ(p.switches_failed, 1);
  EXPECT_EQ(p.switches_refused, 1);
  // The done switch moved the layout before meta confirms it.
  EXPECT_EQ(p.layout, "TP");
  EXPECT_EQ(s.series_end_s, 9);

  // The Log: the phase breakdown, the failure in red, the refusal in yellow.
  ASSERT_GE(s.log.size(), 4u);
  const LogLine& done = s.log[s.log.size() - 3];
  EXPECT_EQ(done.text,
            "switch EP -> TP in 12.5 ms: weights 10.1 ms (7.9 GB/s: permute 1.2, exchange 6.0, "
            "place 2.9), state 1.5 ms (12 pages, 3 slots, 96 KiB), other 2.4; 36.00 MiB, 4 layers "
            "(command)");
  EXPECT_EQ(done.level, LogLevel::kInfo);
  EXPECT_EQ(done.t_us, 5 * kS + 100);
  const LogLine& fail = s.log[s.log.size() - 2];
  EXPECT_EQ(fail.level, LogLevel::kError);
  EXPECT_EQ(fail.text,
            "switch TP -> EP FAILED: injected fault at layer 1 (exchange); rolled back to TP "
            "(policy: batch 80 >= T_h 64)");
  const LogLine& refuse = s.log.back();
  EXPECT_EQ(refuse.level, LogLevel::kWarn);
  EXPECT_EQ(refuse.text,
            "switch TP -> EP refused: a rebalance is in progress (policy: batch 80 >= T_h 64)");
}

TEST(ConsoleParallel, SwitchTimelineIsBounded) {
  ParallelStatus st;
  for (int i = 0; i < 10; ++i) {
    ApplyParallelEvent(Ev(i, i * kS, "switch", "switch", "done",
                          DoneDetail(i % 2 ? "TP" : "EP", i % 2 ? "EP" : "TP")),
                       i, st, 4);
  }
  ASSERT_EQ(st.switches.size(), 4u);
  EXPECT_EQ(st.switches.front().step, 6);  // the oldest fell off
  EXPECT_EQ(st.switches_done, 10);
  EXPECT_EQ(st.layout, "EP");
}

TEST(ConsoleParallel, PolicyDecisionIsKeptAndLogged) {
  Collector c;
  nlohmann::json d = {{"action", "switch_to_ep"},
                      {"why", "above_high"},
                      {"step", 120},
                      {"layout", "tp"},
                      {"batch", 70},
                      {"mean", 66.5},
                      {"window", 32},
                      {"t_high", 64},
                      {"t_low", 51.2},
                      {"cooldown_left", 0},
                      {"rollout", false}};
  c.Consume(Ev(1, 3 * kS, "policy", "decision", "", d, "batch 70 >= T_h 64: switch to EP now"));
  const Snapshot s = c.TakeSnapshot();
  const PolicyDecision& p = s.parallel.decision;
  EXPECT_EQ(p.step, 120);
  EXPECT_EQ(p.action, "switch_to_ep");
  EXPECT_EQ(p.why, "above_high");
  EXPECT_EQ(p.batch, 70);
  EXPECT_DOUBLE_EQ(p.mean, 66.5);
  EXPECT_EQ(p.message, "batch 70 >= T_h 64: switch to EP now");
  EXPECT_THAT(LogTexts(s), ElementsAre("policy step 120: batch 70 >= T_h 64: switch to EP now "
                                       "[switch_to_ep]"));
}

nlohmann::json CalibrationDone(bool applied) {
  return {{"points",
           {{{"batch", 16}, {"tp_ms", 3.0}, {"ep_ms", 3.5}, {"faster", "TP"}},
            {{"batch", 1}, {"tp_ms", 1.0}, {"ep_ms", 2.0}, {"faster", "TP"}},
            {{"batch", 64}, {"tp_ms", 9.0}, {"ep_ms", 6.0}, {"faster", "EP"}}}},
          {"kind", "crossover"},
          {"sign_changes", 1},
          {"crossover_batch", 23.4},
          {"lower_batch", 16},
          {"upper_batch", 64},
          {"t_high", 24},
          {"t_low", 19.2},
          {"summary", "EP faster above batch 23.4"},
          {"table", "  batch  TP ms  EP ms\n      1  1.000  2.000\nEP faster above batch 23.4\n"},
          {"applied", applied}};
}

TEST(ConsoleParallel, CalibrationStartedThenDone) {
  Collector c;
  c.Consume(Ev(1, kS, "calibrate", "calibrate", "started",
               {{"batches", {1, 16, 64}}, {"steps", 8}, {"apply", true}}));
  Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.parallel.calibration.phase, "started");
  EXPECT_THAT(s.parallel.calibration.batches, ElementsAre(1, 16, 64));
  c.Consume(Ev(2, 4 * kS, "calibrate", "calibrate", "done", CalibrationDone(true)));
  s = c.TakeSnapshot();
  const CalibrationStatus& cal = s.parallel.calibration;
  EXPECT_EQ(cal.phase, "done");
  ASSERT_EQ(cal.points.size(), 3u);
  EXPECT_EQ(cal.points[0].batch, 1);  // sorted by batch
  EXPECT_EQ(cal.points[2].batch, 64);
  EXPECT_DOUBLE_EQ(cal.points[2].ep_ms, 6.0);
  EXPECT_EQ(cal.points[2].faster, "EP");
  EXPECT_TRUE(cal.has_crossover);
  EXPECT_DOUBLE_EQ(cal.crossover_batch, 23.4);
  EXPECT_EQ(cal.t_high, 24);
  EXPECT_DOUBLE_EQ(cal.t_low, 19.2);
  EXPECT_TRUE(cal.applied);
  EXPECT_THAT(LogTexts(s),
              ElementsAre("calibrate started: batches 1,16,64, 8 steps each, apply",
                          "calibrate done: crossover batch 23.4: T_h 24, T_l 19.2 (applied to "
                          "the policy)",
                          "    batch  TP ms  EP ms", "        1  1.000  2.000",
                          "  EP faster above batch 23.4"));
}

TEST(ConsoleParallel, CalibrationWithoutCrossoverAndFailure) {
  ParallelStatus st;
  nlohmann::json d = CalibrationDone(false);
  d["kind"] = "tp_everywhere";
  for (const char* k : {"crossover_batch", "t_high", "t_low"}) d[k] = nullptr;
  const telemetry::Event done = Ev(1, kS, "calibrate", "calibrate", "done", d);
  ApplyParallelEvent(done, 5, st);
  EXPECT_FALSE(st.calibration.has_crossover);
  EXPECT_EQ(st.calibration.kind, "tp_everywhere");
  EXPECT_EQ(ParallelEventLines(done)[0].text, "calibrate done: no crossover (tp_everywhere)");

  const telemetry::Event failed =
      Ev(2, 2 * kS, "calibrate", "calibrate", "failed", {{"error", "one already runs"}});
  ApplyParallelEvent(failed, 6, st);
  EXPECT_EQ(st.calibration.phase, "failed");
  EXPECT_EQ(st.calibration.error, "one already runs");
  const std::vector<LogLine> lines = ParallelEventLines(failed);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, LogLevel::kError);
  EXPECT_EQ(lines[0].text, "calibrate failed: one already runs");
}

// TP -> EP re-homes requests first (Algorithm 4): the Log line says how many.
TEST(ConsoleParallel, RehomeBeforeEpIsInTheLogLine) {
  nlohmann::json d = DoneDetail("TP", "EP");
  d["rehome"] = {{"requests", 5}, {"moved", 2}, {"moved_pages", 9}, {"fits", true}};
  const std::vector<LogLine> lines =
      ParallelEventLines(Ev(1, 7 * kS, "switch", "switch", "done", d));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0].text, ::testing::EndsWith("; re-homed 2 of 5 requests (9 pages)"));
  EXPECT_THAT(lines[0].text, ::testing::StartsWith("switch TP -> EP in 12.5 ms"));
}

TEST(ConsoleParallel, RepliesAreWorded) {
  EXPECT_EQ(ParallelReplyText("switch", DoneDetail("EP", "TP")), "EP -> TP in 12.5 ms");
  EXPECT_EQ(ParallelReplyText("switch", {{"from", "TP"}, {"to", "TP"}, {"layers", 0}}),
            "already TP");
  EXPECT_EQ(
      ParallelReplyText("calibrate",
                        {{"started", true}, {"batches", {1, 4}}, {"steps", 8}, {"apply", false}}),
      "started: batches 1,4, 8 steps each; result in the Log");
  EXPECT_EQ(ParallelReplyText("calibrate", {{"started", true},
                                            {"batches", {64, 2048}},
                                            {"steps", 8},
                                            {"prompt_len", 512},
                                            {"clock", "simulated"},
                                            {"apply", true}}),
            "started: batches 64,2048, 8 steps each, prompt 512 (simulated), apply; result in the "
            "Log");
  EXPECT_EQ(ParallelReplyText("pause", {{"paused", true}}), "");
  EXPECT_EQ(ParallelReplyText(
                "expert_stats",
                {{"balancedness_mean", 0.62},
                 {"window_steps", 100},
                 {"hottest", {{{"layer", 1}, {"expert", 8}, {"tokens", 90}, {"share", 0.45}}}},
                 {"path", "/tmp/load.json"}}),
            "balancedness 0.62 over 100 steps, hottest L1 e8 (45% of its layer); written to "
            "/tmp/load.json");
}

}  // namespace
}  // namespace sy::console
