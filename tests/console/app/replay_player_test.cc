#include "console/app/replay_player.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "tests/console/app/test_store.h"

namespace sy::console {
namespace {

using ::sy::console::testing::SyntheticRun;
using ::sy::console::testing::TempDir;
using ::sy::console::testing::WriteSyntheticRun;
using ::testing::HasSubstr;

class ConsoleReplayPlayer : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_ / "runs.db";
    WriteSyntheticRun(path_);
  }
  TempDir dir_;
  std::string path_;
  Collector collector_;
};

TEST_F(ConsoleReplayPlayer, OpensNewestRunAndShowsTheClock) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ((*p)->run().id, "run-test");
  EXPECT_EQ((*p)->run().duration_us, 30'000'000);
  const Snapshot s = collector_.TakeSnapshot();
  EXPECT_EQ(s.conn, ConnState::kReplay);
  EXPECT_DOUBLE_EQ(s.replay.duration_s, 30);
  EXPECT_EQ(s.db_path, path_);
}

TEST_F(ConsoleReplayPlayer, AdvanceFeedsWhatThePlayClockPassed) {
  auto p = ReplayPlayer::Open(path_, "run-test", &collector_);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->Advance(1.0), IsOk());
  Snapshot s = collector_.TakeSnapshot();
  EXPECT_EQ(s.steps_seen, 11);  // t = 0, 0.1, ..., 1.0 s
  EXPECT_TRUE(s.have_meta);
  EXPECT_EQ(s.meta.model.preset, "tiny-moe");
  EXPECT_DOUBLE_EQ(s.replay.position_s, 1.0);
  ASSERT_THAT((*p)->Apply(ReplayAction::kFaster), IsOk());
  ASSERT_THAT((*p)->Advance(1.0), IsOk());  // 2 s of run at x2
  s = collector_.TakeSnapshot();
  EXPECT_DOUBLE_EQ(s.replay.position_s, 3.0);
  EXPECT_DOUBLE_EQ(s.replay.speed, 2);
  EXPECT_EQ(s.steps_seen, 31);
  EXPECT_EQ(s.gaps, 0);
  // Rates are in engine time, whatever the playback speed.
  EXPECT_DOUBLE_EQ(s.cur_prefill_tps, 1000);
}

TEST_F(ConsoleReplayPlayer, PauseStopsTheClock) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->Apply(ReplayAction::kPlayPause), IsOk());
  ASSERT_THAT((*p)->Advance(5.0), IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 0);
  EXPECT_FALSE((*p)->clock().playing);
}

TEST_F(ConsoleReplayPlayer, SeekBackRebuildsStateAndSeekEndFeedsAll) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->SeekTo(15), IsOk());
  EXPECT_EQ(collector_.TakeSnapshot().steps_seen, 151);
  ASSERT_THAT((*p)->Apply(ReplayAction::kSeekBack), IsOk());  // to 5 s
  Snapshot s = collector_.TakeSnapshot();
  EXPECT_DOUBLE_EQ(s.replay.position_s, 5);
  EXPECT_EQ(s.steps_seen, 51);
  EXPECT_EQ(s.gaps, 0);  // a rebuilt collector does not see false gaps
  ASSERT_THAT((*p)->Apply(ReplayAction::kSeekForward), IsOk());
  EXPECT_EQ(collector_.TakeSnapshot().steps_seen, 151);
  ASSERT_THAT((*p)->Apply(ReplayAction::kSeekEnd), IsOk());
  s = collector_.TakeSnapshot();
  EXPECT_EQ(s.steps_seen, 300);
  EXPECT_EQ(s.requests_seen, 60);
  EXPECT_EQ(s.spans_seen, 1200);
  ASSERT_THAT((*p)->Apply(ReplayAction::kSeekStart), IsOk());
  EXPECT_EQ(collector_.TakeSnapshot().steps_seen, 1);
  ASSERT_THAT((*p)->SeekTo(-5), IsOk());  // clamped
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 0);
}

TEST_F(ConsoleReplayPlayer, PlayingToTheEndStopsAndPlayRestarts) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->Advance(100), IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 30);
  EXPECT_FALSE((*p)->clock().playing);
  ASSERT_THAT((*p)->Apply(ReplayAction::kPlayPause), IsOk());
  EXPECT_TRUE((*p)->clock().playing);
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 0);
}

TEST_F(ConsoleReplayPlayer, SpeedIsClamped) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  for (int i = 0; i < 10; ++i) ASSERT_THAT((*p)->Apply(ReplayAction::kFaster), IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().speed, kMaxSpeed);
  for (int i = 0; i < 20; ++i) ASSERT_THAT((*p)->Apply(ReplayAction::kSlower), IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().speed, kMinSpeed);
}

TEST_F(ConsoleReplayPlayer, PlayToEndGivesTheWholeRun) {
  auto p = ReplayPlayer::Open(path_, "", &collector_);
  ASSERT_THAT(p, IsOk());
  ASSERT_THAT((*p)->PlayToEnd(), IsOk());
  const Snapshot s = collector_.TakeSnapshot();
  EXPECT_EQ(s.steps_seen, 300);
  EXPECT_EQ(s.requests_seen, 60);
  EXPECT_EQ(s.spans_seen, 1200);
  EXPECT_EQ(s.expert_window_steps, 64);
  EXPECT_EQ(s.device_tokens.size(), 2u);
  EXPECT_EQ(s.engine_state, "running");
}

TEST(ConsoleReplayPlayerLateJoin, ClockStartsAtTheFirstStoredMessage) {
  TempDir dir;
  const std::string path = dir / "late.db";
  {
    auto w = store::Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    // A console that joined 12.5 s into the run: nothing stored before.
    for (int i = 0; i < 20; ++i) {
      telemetry::Step s;
      s.env = testing::Env("late", 100 + i, 12'500'000 + i * 100'000);
      s.step = 100 + i;
      s.decode_tokens = 1;
      (*w)->Enqueue(s);
    }
    (*w)->Flush();
  }
  Collector c;
  auto p = ReplayPlayer::Open(path, "", &c);
  ASSERT_THAT(p, IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 12.5);
  EXPECT_EQ(c.TakeSnapshot().steps_seen, 1);
  ASSERT_THAT((*p)->Advance(0.5), IsOk());
  EXPECT_EQ(c.TakeSnapshot().steps_seen, 6);
  ASSERT_THAT((*p)->Apply(ReplayAction::kSeekStart), IsOk());
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 12.5);
  EXPECT_EQ(c.TakeSnapshot().steps_seen, 1);
  ASSERT_THAT((*p)->Apply(ReplayAction::kSeekBack), IsOk());  // cannot go before the start
  EXPECT_DOUBLE_EQ((*p)->clock().position_s, 12.5);
}

TEST_F(ConsoleReplayPlayer, MissingRunOrFile) {
  EXPECT_THAT(ReplayPlayer::Open(path_, "nope", &collector_),
              StatusIs(StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_THAT(ReplayPlayer::Open(dir_ / "absent.db", "", &collector_),
              StatusIs(StatusCode::kNotFound, HasSubstr("absent.db")));
  const std::string empty = dir_ / "empty.db";
  { ASSERT_THAT(store::Writer::Open(empty), IsOk()); }
  EXPECT_THAT(ReplayPlayer::Open(empty, "", &collector_),
              StatusIs(StatusCode::kNotFound, HasSubstr("holds no runs")));
}

}  // namespace
}  // namespace sy::console
