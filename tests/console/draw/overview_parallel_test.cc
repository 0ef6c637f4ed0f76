// Headless tests of the Overview's TP <-> EP rows: layout timeline strip,
// policy gauge, switches, decision, calibration curves; at 80x24 and larger.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/draw/views.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::FixtureSnapshot;
using ::sy::console::testing::RowsFit;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int64_t kS = 1'000'000;

SwitchMark Mark(int64_t sec, std::string phase, std::string from, std::string to) {
  SwitchMark m;
  m.t_us = sec * kS + 300'000;
  m.step = sec * 20;
  m.phase = std::move(phase);
  m.from = std::move(from);
  m.to = std::move(to);
  m.total_ms = 12.5;
  m.rolled_back = m.phase == "failed";
  m.why = m.phase == "done" ? "command" : "injected fault";
  return m;
}

// The fixture's 60 seconds (0..59) with switches EP->TP at 40 s, a failed
// TP->EP at 50 s and TP->EP at 55 s, an auto policy and a decision.
Snapshot SwitchingSnapshot() {
  Snapshot s = FixtureSnapshot();
  s.series_end_s = 59;
  s.cur_running = 30;
  ParallelStatus& p = s.parallel;
  p.layout = "EP";
  p.policy.known = true;
  p.policy.mode = "auto";
  p.policy.t_high = 40;
  p.policy.t_low = 32;
  p.policy.t_low_auto = true;
  p.policy.window = 32;
  p.policy.cooldown = 16;
  p.policy.queue = 8;
  p.policy.rollout = "auto";
  p.switches = {Mark(40, "done", "EP", "TP"), Mark(50, "failed", "TP", "EP"),
                Mark(55, "done", "TP", "EP")};
  p.switches_done = 2;
  p.switches_failed = 1;
  p.decision.t_us = 55 * kS;
  p.decision.step = 1100;
  p.decision.action = "switch_to_ep";
  p.decision.message = "batch 45 >= T_h 40: switch to EP now";
  return s;
}

void AddCalibration(Snapshot& s) {
  CalibrationStatus& c = s.parallel.calibration;
  c.phase = "done";
  c.t_us = 30 * kS;
  c.points = {{1, 1.0, 2.0, "TP"}, {16, 3.0, 3.5, "TP"}, {64, 9.0, 6.0, "EP"}};
  c.kind = "crossover";
  c.has_crossover = true;
  c.crossover_batch = 23.4;
  c.t_high = 24;
  c.t_low = 19.2;
  c.applied = true;
}

TEST(ConsoleDrawOverviewSwitch, TimelineStripSharesTheSparklineAxis) {
  const Grid g = DrawOverview(SwitchingSnapshot(), ViewState{}, Rect{0, 2, 80, 20});
  // Row 8, under "waiting": label and layout, then 61 columns of which the
  // last 60 are the seconds 0..59 like the block sparklines above.
  const std::string row = g.Row(8);
  EXPECT_THAT(row, StartsWith("layout          EP  "));
  const int chart_x = 19;
  const int w = 80 - chart_x;
  const auto col = [&](int sec) { return chart_x + w - 1 - (59 - sec); };
  EXPECT_EQ(g.at(col(0), 8).ch, U'─');  // EP before the first switch
  EXPECT_EQ(g.at(col(39), 8).ch, U'─');
  EXPECT_EQ(g.at(col(40), 8).ch, U'T');  // switched to TP
  EXPECT_EQ(g.at(col(41), 8).ch, U'━');
  EXPECT_EQ(g.at(col(50), 8).ch, U'✗');  // failed, rolled back: still TP after
  EXPECT_EQ(g.at(col(50), 8).style.fg, Color::kRed);
  EXPECT_EQ(g.at(col(51), 8).ch, U'━');
  EXPECT_EQ(g.at(col(55), 8).ch, U'E');
  EXPECT_EQ(g.at(col(59), 8).ch, U'─');
  EXPECT_EQ(g.at(chart_x, 8).ch, U' ');  // before the series starts
  // The batch sparkline's newest sample sits in the same column.
  EXPECT_NE(g.at(col(59), 5).ch, U' ');
  EXPECT_THAT(g.Row(9), StartsWith("Latency, last 200 requests"));
}

TEST(ConsoleDrawOverviewSwitch, PolicyGaugeSwitchesAndDecisionAt80x24) {
  const Grid g = DrawOverview(SwitchingSnapshot(), ViewState{}, Rect{0, 2, 80, 20});
  EXPECT_THAT(g.Row(14), StartsWith("Model    tiny-moe"));
  EXPECT_THAT(g.Row(16), StartsWith("Workload poisson 20 req/s"));
  // Gauge 26 wide (24 inside) on a scale of 1.5 T_h = 60: batch 30 fills 12
  // cells, T_l 32 marks cell 12, T_h 40 cell 16.
  const std::string policy = g.Row(17);
  EXPECT_THAT(policy, StartsWith("Policy   auto   [████████████┆░░░┃░░░░░░░] batch 30  "
                                 "T_l┆32a  T_h┃40  W 32  C 16"));
  EXPECT_EQ(g.Row(17).find("Q 8"), std::string::npos);  // the queue no longer fits
  EXPECT_EQ(g.at(9, 17).style.fg, Color::kGreen);       // auto mode
  EXPECT_THAT(g.Row(18), StartsWith("Switches 2 done, 1 failed; last TP->EP 12.5 ms at 55.3s "
                                    "(command)"));
  EXPECT_THAT(g.Row(19), StartsWith("Decision step 1100: batch 45 >= T_h 40: switch to EP now"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawOverviewSwitch, WholeFrameFits80x24WithCalibration) {
  Snapshot s = SwitchingSnapshot();
  AddCalibration(s);
  const Grid g = DrawFrame(s, ViewState{}, 80, 24);
  EXPECT_TRUE(RowsFit(g));
  // No room for the curves at 80x24: the view ends with the decision row.
  EXPECT_THAT(g.Row(21), StartsWith("Decision step 1100"));
  EXPECT_THAT(g.ToString(), Not(HasSubstr("Calibration at")));
  EXPECT_THAT(g.Row(23), StartsWith(" ● live"));
}

TEST(ConsoleDrawOverviewSwitch, CalibrationRowAndCurvesWhenTaller) {
  Snapshot s = SwitchingSnapshot();
  AddCalibration(s);
  const Grid g = DrawOverview(s, ViewState{}, Rect{0, 2, 100, 32});
  EXPECT_THAT(g.Row(17), HasSubstr("T_h┃40  W 32  C 16  Q 8"));  // room for the queue
  EXPECT_THAT(g.Row(20), StartsWith("Calib    crossover batch 23.4: T_h 24, T_l 19.2 applied, "
                                    "3 points"));
  EXPECT_THAT(g.Row(22), StartsWith("Calibration at 30.0s: decode step latency by batch, 0 to "
                                    "9.00 ms"));
  EXPECT_THAT(g.Row(23), StartsWith("      1  TP  1.000ms ["));
  EXPECT_THAT(g.Row(23), HasSubstr("  EP  2.000ms ["));
  EXPECT_THAT(g.Row(24), StartsWith("     16  TP  3.000ms ["));
  EXPECT_THAT(g.Row(25), StartsWith("   23.4  ── crossover: EP faster above (T_h 24, T_l 19.2)"));
  EXPECT_THAT(g.Row(26), StartsWith("     64  TP  9.000ms ["));
  // Bars share one scale: the 9 ms bar is full, the faster layout's bold.
  EXPECT_THAT(g.Row(26), HasSubstr("█]"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawOverviewSwitch, ManualEngineWithoutPolicyOrSwitches) {
  Snapshot s = FixtureSnapshot();
  s.series_end_s = 59;
  s.parallel.layout = "TP";
  const Grid g = DrawOverview(s, ViewState{}, Rect{0, 2, 80, 20});
  EXPECT_THAT(g.Row(8), StartsWith("layout          TP  "));
  EXPECT_THAT(g.Row(8), EndsWith("━━━━━"));
  EXPECT_EQ(g.Row(17), std::string(80, ' '));  // no policy row for older engines
}

}  // namespace
}  // namespace sy::console
