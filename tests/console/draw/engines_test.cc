// Several engines on one screen, headless: the merged snapshot's figures are
// the sums of the engines', and the frame shows the strip, the per-engine
// table, the merged Overview, one band per engine where views do not add up,
// and exactly one engine's views when one is selected.
#include "console/draw/engines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/collect/merge.h"
#include "console/draw/format.h"
#include "console/draw/views.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::FixtureSnapshot;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A second engine, different in every figure the Overview sums.
Snapshot SecondEngine() {
  Snapshot s = FixtureSnapshot();
  s.run = "run-b";
  s.meta.layout = "TP";
  s.meta.devices = 4;
  s.conn = ConnState::kLost;
  s.prefill_tps.assign(10, 400.0);  // shorter series: the newest 10 seconds
  s.decode_tps.assign(10, 20.0);
  s.batch.assign(10, 1.0);
  s.running.assign(10, 3.0);
  s.waiting.assign(10, 5.0);
  s.cur_prefill_tps = 4321;
  s.cur_decode_tps = 120;
  s.cur_batch = 2;
  s.cur_running = 3;
  s.cur_waiting = 5;
  s.finished_total = 500;
  s.generated_total = 4'400;
  s.ttft = {20'000, 90'000, 100};
  s.tpot = {1'000, 1'500, 100};
  s.log = {{1, LogLevel::kInfo, "only in engine two"}};
  for (auto& d : s.kv) d.kv_pages_used = 7;
  return s;
}

// The first row of `g` that starts with `prefix`, "" if none.
std::string RowStarting(const Grid& g, const std::string& prefix) {
  for (int y = 0; y < g.height(); ++y) {
    if (g.Row(y).rfind(prefix, 0) == 0) return g.Row(y);
  }
  return "";
}

TEST(ConsoleMergeSnapshots, OverviewFiguresAreTheSumsOfTheEngines) {
  const Snapshot a = FixtureSnapshot(), b = SecondEngine();
  const Snapshot m = MergeSnapshots({a, b});
  EXPECT_DOUBLE_EQ(m.cur_prefill_tps, a.cur_prefill_tps + b.cur_prefill_tps);
  EXPECT_DOUBLE_EQ(m.cur_decode_tps, a.cur_decode_tps + b.cur_decode_tps);
  EXPECT_EQ(m.cur_batch, a.cur_batch + b.cur_batch);
  EXPECT_EQ(m.cur_running, a.cur_running + b.cur_running);
  EXPECT_EQ(m.cur_waiting, a.cur_waiting + b.cur_waiting);
  EXPECT_EQ(m.finished_total, a.finished_total + b.finished_total);
  EXPECT_EQ(m.generated_total, a.generated_total + b.generated_total);
  EXPECT_EQ(m.meta.devices, a.meta.devices + b.meta.devices);
  EXPECT_EQ(m.meta.layout, "EP/TP");
  EXPECT_EQ(m.conn, ConnState::kLost);  // the worst engine
  {
    Snapshot ended = b, live = a;
    ended.conn = ConnState::kEnded;
    live.conn = ConnState::kLive;
    EXPECT_EQ(MergeSnapshots({ended, live}).conn, ConnState::kLive);  // one still serves
    EXPECT_EQ(MergeSnapshots({live, ended}).conn, ConnState::kLive);
    EXPECT_EQ(MergeSnapshots({ended, ended}).conn, ConnState::kEnded);
  }
  EXPECT_EQ(m.received, a.received + b.received);
  // Series aligned on the newest second: the last 10 points hold both.
  ASSERT_EQ(m.prefill_tps.size(), a.prefill_tps.size());
  for (size_t i = 0; i < m.prefill_tps.size(); ++i) {
    const size_t from_end = m.prefill_tps.size() - 1 - i;
    const double expect = a.prefill_tps[i] + (from_end < 10 ? 400.0 : 0.0);
    EXPECT_DOUBLE_EQ(m.prefill_tps[i], expect) << i;
    EXPECT_DOUBLE_EQ(m.running[i], a.running[i] + (from_end < 10 ? 3.0 : 0.0)) << i;
  }
  // Percentiles: counts add, p99 is the larger, p50 the weighted mean.
  EXPECT_EQ(m.ttft.count, 300);
  EXPECT_EQ(m.ttft.p99_us, 90'000);
  EXPECT_EQ(m.ttft.p50_us, (12'340 * 200 + 20'000 * 100) / 300);
  // Memory: every device, renumbered.
  ASSERT_EQ(m.kv.size(), a.kv.size() + b.kv.size());
  for (size_t i = 0; i < m.kv.size(); ++i) EXPECT_EQ(m.kv[i].device, static_cast<int>(i));
  // One engine: unchanged.
  EXPECT_EQ(MergeSnapshots({a}).cur_prefill_tps, a.cur_prefill_tps);
}

TEST(ConsoleDrawEngines, AllShowsTableAndMergedOverview) {
  const Snapshot a = FixtureSnapshot(), b = SecondEngine();
  ViewState v;
  v.engine_count = 2;
  v.engine = -1;
  const Grid g = DrawEngineFrame({a, b}, {"tcp://h1:5555", "tcp://h2:5555"}, v, 120, 40);
  // Strip: both engines with their states, "all" selected.
  EXPECT_THAT(g.Row(0), StartsWith(" engines  all  1 tcp://h1:5555 live 2 tcp://h2:5555 lost"));
  // Per-engine rows and the sum row.
  const std::string r1 = RowStarting(g, "1   tcp://h1:5555");
  const std::string r2 = RowStarting(g, "2   tcp://h2:5555");
  const std::string sum = RowStarting(g, "    sum");
  EXPECT_THAT(r1, HasSubstr("run-42"));
  EXPECT_THAT(r1, HasSubstr(FormatRate(12'345)));
  EXPECT_THAT(r2, HasSubstr("4 dev TP"));
  EXPECT_THAT(r2, HasSubstr(FormatRate(4'321)));
  EXPECT_THAT(sum, HasSubstr(FormatRate(12'345 + 4'321)));
  EXPECT_THAT(sum, HasSubstr(FormatRate(850 + 120)));
  EXPECT_THAT(sum, HasSubstr("6 dev"));
  // The merged Overview below shows the same sums.
  EXPECT_THAT(RowStarting(g, "prefill "), HasSubstr(FormatRate(16'666)));
  EXPECT_THAT(RowStarting(g, "decode "), HasSubstr(FormatRate(970)));
  EXPECT_THAT(RowStarting(g, "running "), StartsWith("running         11 "));
  EXPECT_THAT(RowStarting(g, "waiting "), StartsWith("waiting          7 "));
  // Header and status line: the merged picture (worst state: lost).
  EXPECT_THAT(g.Row(1), HasSubstr("LOST"));
  EXPECT_THAT(g.Row(39), HasSubstr("lost"));
}

TEST(ConsoleDrawEngines, SelectedEngineShowsOnlyItsOwnViews) {
  const Snapshot a = FixtureSnapshot(), b = SecondEngine();
  ViewState v;
  v.engine_count = 2;
  v.engine = 1;
  const Grid g = DrawEngineFrame({a, b}, {"tcp://h1:5555", "tcp://h2:5555"}, v, 120, 40);
  // The frame below the strip is engine 2's own frame, row for row.
  const Grid own = DrawFrame(b, v, 120, 39);
  for (int y = 0; y < 39; ++y) EXPECT_EQ(g.Row(y + 1), own.Row(y)) << y;
  EXPECT_THAT(g.ToString(), Not(HasSubstr("run-42")));
  EXPECT_THAT(RowStarting(g, "prefill "), HasSubstr(FormatRate(4'321)));
}

TEST(ConsoleDrawEngines, LogIsOneBandPerEngine) {
  Snapshot a = FixtureSnapshot(), b = SecondEngine();
  a.log = {{1, LogLevel::kInfo, "only in engine one"}};
  ViewState v;
  v.engine_count = 2;
  v.view = View::kLog;
  const Grid g = DrawEngineFrame({a, b}, {"e-one", "e-two"}, v, 100, 30);
  const std::string text = g.ToString();
  const size_t band1 = text.find(" engine 1  e-one  live  run run-42");
  const size_t band2 = text.find(" engine 2  e-two  lost  run run-b");
  ASSERT_NE(band1, std::string::npos) << text;
  ASSERT_NE(band2, std::string::npos) << text;
  const size_t one = text.find("only in engine one"), two = text.find("only in engine two");
  ASSERT_NE(one, std::string::npos);
  ASSERT_NE(two, std::string::npos);
  EXPECT_TRUE(band1 < one && one < band2 && band2 < two);
}

TEST(ConsoleDrawEngines, OneEngineIsThePlainFrameAndTinyTerminalsSaySo) {
  const Snapshot a = FixtureSnapshot();
  ViewState v;
  EXPECT_EQ(DrawEngineFrame({a}, {"x"}, v, 80, 24).ToString(), DrawFrame(a, v, 80, 24).ToString());
  v.engine_count = 2;
  const Grid small = DrawEngineFrame({a, SecondEngine()}, {"x", "y"}, v, 30, 6);
  EXPECT_THAT(small.ToString(), HasSubstr("terminal too small"));
  // 80x24 with two engines: every row fits, the strip first.
  const Grid g = DrawEngineFrame({a, SecondEngine()}, {"x", "y"}, v, 80, 24);
  EXPECT_EQ(g.height(), 24);
  EXPECT_THAT(g.Row(0), StartsWith(" engines  all  1 x live 2 y lost"));
}

}  // namespace
}  // namespace sy::console
