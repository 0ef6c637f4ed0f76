// Replay navigation and comparison through a real store file: the store's
// indexed event and step queries, the player's seeks and event jumps,
// compare windows, and the run browser's rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "console/app/compare_loader.h"
#include "console/app/replay_player.h"
#include "console/app/run_browser.h"
#include "tests/console/app/event_store.h"

namespace sy::console {
namespace {

using ::sy::console::testing::kFirstStep;
using ::sy::console::testing::TempDir;
using ::sy::console::testing::WriteEventRun;
using ::testing::HasSubstr;

MATCHER_P(IsOkAndHolds, value, "is OK and holds " + ::testing::PrintToString(value)) {
  return arg.ok() && *arg == value;
}

class ConsoleReplaySeek : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_ / "events.db";
    WriteEventRun(path_);
  }
  TempDir dir_;
  std::string path_;
  Collector collector_;
};

TEST_F(ConsoleReplaySeek, StoreFindsNearestEventsSkippingNoise) {
  auto r = store::Reader::Open(path_);
  ASSERT_THAT(r, IsOk());
  store::Reader& reader = **r;
  auto next = reader.NearestEvent("run-ev", 0, true);
  ASSERT_THAT(next, IsOk());
  ASSERT_TRUE(next->has_value());  // the policy decision at 10 s is skipped
  EXPECT_EQ((*next)->t_us, 15'000'000);
  EXPECT_EQ((*next)->kind, "command");
  EXPECT_EQ((*next)->name, "switch tp");
  next = reader.NearestEvent("run-ev", 15'000'000, true);  // layer phase skipped
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ((*next)->t_us, 30'000'000);
  EXPECT_EQ((*next)->kind, "switch");
  EXPECT_EQ((*next)->message, "EP -> TP in 12 ms");
  next = reader.NearestEvent("run-ev", 45'000'000, true);
  ASSERT_THAT(next, IsOk());
  EXPECT_FALSE(next->has_value());
  auto prev = reader.NearestEvent("run-ev", 45'000'000, false);
  ASSERT_THAT(prev, IsOk());
  EXPECT_EQ((*prev)->t_us, 30'000'000);
  EXPECT_THAT(reader.NearestEvent("nope", 0, true), StatusIs(StatusCode::kNotFound));
}

TEST_F(ConsoleReplaySeek, StoreMapsStepsToTimes) {
  auto r = store::Reader::Open(path_);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT((*r)->StepTime("run-ev", 0), IsOkAndHolds(0));
  EXPECT_THAT((*r)->StepTime("run-ev", kFirstStep), IsOkAndHolds(0));
  EXPECT_THAT((*r)->StepTime("run-ev", kFirstStep + 1), IsOkAndHolds(100'000));
  EXPECT_THAT((*r)->StepTime("run-ev", kFirstStep + 300), IsOkAndHolds(30'000'000));
  EXPECT_THAT((*r)->StepTime("run-ev", kFirstStep + 599), IsOkAndHolds(59'900'000));
  EXPECT_THAT((*r)->StepTime("run-ev", kFirstStep + 600),
              StatusIs(StatusCode::kNotFound, HasSubstr("no step 1600 (last 1599)")));
  auto meta = (*r)->MetaAt("run-ev", 29'999'999);
  ASSERT_THAT(meta, IsOk());
  EXPECT_EQ((*meta)->layout, "EP");
  meta = (*r)->MetaAt("run-ev", 30'000'000);
  ASSERT_THAT(meta, IsOk());
  EXPECT_EQ((*meta)->layout, "TP");
}

TEST_F(ConsoleReplaySeek, PlayerJumpsBetweenEventsAndNamesThem) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  ReplayPlayer& player = **p;
  ASSERT_THAT(player.Apply(ReplayAction::kNextEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "command :switch tp ok @ 15.0s");
  EXPECT_EQ(player.TakeNotice(), "");
  ASSERT_THAT(player.Apply(ReplayAction::kNextEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "switch done @ 30.0s: EP -> TP in 12 ms");
  EXPECT_DOUBLE_EQ(player.clock().position_s, 30);
  const Snapshot s = collector_.TakeSnapshot();
  EXPECT_EQ(s.latest_step, kFirstStep + 300);  // the event's moment is fed
  EXPECT_EQ(s.parallel.layout, "TP");
  ASSERT_THAT(player.Apply(ReplayAction::kNextEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "rebalance done @ 45.0s: 4 experts moved");
  // A command recorded at the same engine time is the next mark, not skipped.
  ASSERT_THAT(player.Apply(ReplayAction::kNextEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "command :rebalance ok @ 45.0s");
  ASSERT_THAT(player.Apply(ReplayAction::kNextEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "no event after 45.0s");
  EXPECT_DOUBLE_EQ(player.clock().position_s, 45);
  ASSERT_THAT(player.Apply(ReplayAction::kPrevEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "rebalance done @ 45.0s: 4 experts moved");
  ASSERT_THAT(player.Apply(ReplayAction::kPrevEvent), IsOk());
  EXPECT_EQ(player.TakeNotice(), "switch done @ 30.0s: EP -> TP in 12 ms");
  ASSERT_TRUE(player.current_event().has_value());
  EXPECT_EQ(player.current_event()->kind, "switch");
}

TEST_F(ConsoleReplaySeek, SeekByStepAndFarForwardRebuildsABoundedWindow) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->SeekToStep(kFirstStep + 123), IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 12.3);
  EXPECT_EQ(collector_.TakeSnapshot().latest_step, kFirstStep + 123);
  EXPECT_THAT((*p)->SeekToStep(99999), StatusIs(StatusCode::kNotFound, HasSubstr("seek step")));
  ASSERT_THAT((*p)->SeekTo(59.9), IsOk());
  const Snapshot s = collector_.TakeSnapshot();
  EXPECT_EQ(s.latest_step, kFirstStep + 599);
  EXPECT_EQ(s.gaps, 0);
}

TEST(ConsoleReplaySeekLong, FarForwardSeekReadsOnlyTheRefeedWindow) {
  TempDir dir;
  const std::string path = dir / "long.db";
  testing::WriteSyntheticRun(path, testing::SyntheticRun{.seconds = 300});
  Collector c;
  auto p = ReplayPlayer::Open(path, "", &c);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->SeekTo(290), IsOk());
  Snapshot s = c.TakeSnapshot();
  // 130 s before 290 s at 10 steps a second, not the 2901 steps before it.
  EXPECT_EQ(s.steps_seen, 1301);
  EXPECT_EQ(s.latest_step, 2900);
  EXPECT_EQ(s.gaps, 0);
  EXPECT_TRUE(s.have_meta);  // the Meta in force is fed with the window
  // Spans only for the last 10 s (280.0 .. 290.0 s: 101 steps of 4), and the
  // newest step's are there for the Kernels view.
  EXPECT_EQ(s.spans_seen, 404);
  EXPECT_EQ(s.spans_step, 2900);
  ASSERT_THAT((*p)->SeekTo(295), IsOk());  // near: fed on from where it was
  EXPECT_EQ(c.TakeSnapshot().steps_seen, 1351);
}

TEST_F(ConsoleReplaySeek, CompareTwoWindowsOfTheRun) {
  auto c = CompareRuns(path_, *ParseCompareSide("run-ev@0-30s"), *ParseCompareSide("@30s-"));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->a.label, "run-ev 0.0s-30.0s");
  EXPECT_EQ(c->b.label, "run-ev 30.0s-1m00.0s");
  EXPECT_EQ(c->a.steps, 300);
  EXPECT_EQ(c->b.steps, 300);
  EXPECT_DOUBLE_EQ(c->a.decode_tps, 100);
  EXPECT_DOUBLE_EQ(c->b.decode_tps, 200);
  EXPECT_EQ(c->a.tpot.p50_us, 100);
  EXPECT_EQ(c->b.tpot.p99_us, 80);
  EXPECT_EQ(c->a.requests, 30);
  EXPECT_DOUBLE_EQ(c->a.moe_share, 0.75);
  EXPECT_DOUBLE_EQ(c->b.moe_share, 0.5);
  EXPECT_EQ(c->a.layout, "EP");
  EXPECT_EQ(c->b.layout, "TP");
  EXPECT_EQ(c->summary,
            "B vs A: decode tok/s +100%, TPOT -20%, TTFT -50%, MoE share 75% -> 50%, "
            "layout EP -> TP");
  EXPECT_THAT(CompareRuns(path_, *ParseCompareSide("run-ev@2m-3m"), *ParseCompareSide("")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside run 'run-ev'")));
  EXPECT_THAT(CompareRuns(path_, *ParseCompareSide("nope"), *ParseCompareSide("")),
              StatusIs(StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_THAT(ParseCompareSide("run-ev@30s-10s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ends before it starts")));
}

TEST_F(ConsoleReplaySeek, CompareAroundTheCurrentEvent) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  auto early = CompareInReplay(**p, *ParseCommand("compare event 10s"));
  EXPECT_THAT(early, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no event at or before")));
  ASSERT_THAT((*p)->SeekTo(40), IsOk());  // no jump: the nearest event before, the switch
  auto c = CompareInReplay(**p, *ParseCommand("compare event 10s"));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->a.label, "run-ev 20.0s-30.0s");
  EXPECT_EQ(c->b.label, "run-ev 30.0s-40.0s");
  EXPECT_EQ(c->a.steps, 100);
  EXPECT_DOUBLE_EQ(c->b.decode_tps, 200);
  auto two = CompareInReplay(**p, *ParseCommand("compare 0-10s 50s-"));
  ASSERT_THAT(two, IsOk());
  EXPECT_EQ(two->b.label, "run-ev 50.0s-1m00.0s");
  EXPECT_EQ(two->b.steps, 100);
}

TEST_F(ConsoleReplaySeek, BrowserListsRunsWithTheStoreToolsSummary) {
  testing::WriteSyntheticRun(dir_ / "events.db", testing::SyntheticRun{.id = "run-b"});
  auto b = LoadBrowser(path_);
  ASSERT_THAT(b, IsOk());
  ASSERT_EQ(b->rows.size(), 2u);
  const BrowserRow* ev = b->rows[0].id == "run-ev" ? &b->rows[0] : &b->rows[1];
  EXPECT_EQ(ev->duration, "1m00s");
  EXPECT_EQ(ev->model, "tiny-moe");
  EXPECT_EQ(ev->devices, 2);
  EXPECT_EQ(ev->layouts, "EP>TP");
  EXPECT_EQ(ev->switches, 1);
  EXPECT_EQ(ev->rebalances, 1);
  EXPECT_EQ(ev->steps, 600);
  EXPECT_EQ(ev->status, "ended");
  EXPECT_GT(b->file_bytes, 0);
  EXPECT_THAT(LoadBrowser(dir_ / "absent.db"), StatusIs(StatusCode::kNotFound));
}

TEST(ConsoleRunBrowserKeys, SelectFilterOpenQuit) {
  BrowserState s;
  for (const char* id : {"alpha", "beta", "gamma"}) {
    BrowserRow r;
    r.id = id;
    s.rows.push_back(r);
  }
  EXPECT_EQ(*HandleBrowserKey(s, Key{"Enter"}).open, "alpha");
  HandleBrowserKey(s, Key{"Down"});
  HandleBrowserKey(s, Key{"Down"});
  HandleBrowserKey(s, Key{"Down"});  // stays on the last
  EXPECT_EQ(*HandleBrowserKey(s, Key{"Enter"}).open, "gamma");
  HandleBrowserKey(s, Key{"Up"});
  EXPECT_EQ(*HandleBrowserKey(s, Key{"Enter"}).open, "beta");
  HandleBrowserKey(s, Key{"/"});
  EXPECT_TRUE(s.filtering);
  EXPECT_FALSE(HandleBrowserKey(s, Key{"q"}).quit);  // typed into the filter
  HandleBrowserKey(s, Key{"Backspace"});
  HandleBrowserKey(s, Key{"a"});
  HandleBrowserKey(s, Key{"m"});
  HandleBrowserKey(s, Key{"Enter"});
  EXPECT_FALSE(s.filtering);
  EXPECT_EQ(s.filter, "am");
  EXPECT_EQ(BrowserVisible(s), (std::vector<int>{2}));
  EXPECT_EQ(*HandleBrowserKey(s, Key{"Enter"}).open, "gamma");
  EXPECT_FALSE(HandleBrowserKey(s, Key{"Esc"}).quit);  // clears the filter first
  EXPECT_EQ(s.filter, "");
  EXPECT_TRUE(HandleBrowserKey(s, Key{"Esc"}).quit);
  EXPECT_TRUE(HandleBrowserKey(s, Key{"q"}).quit);
  BrowserState empty;
  EXPECT_FALSE(HandleBrowserKey(empty, Key{"Enter"}).open.has_value());
}

}  // namespace
}  // namespace sy::console
