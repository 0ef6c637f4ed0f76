#include "console/input/replay_commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy::console {
namespace {

using ::testing::HasSubstr;

MATCHER_P(IsOkAndHolds, value, "is OK and holds " + ::testing::PrintToString(value)) {
  return arg.ok() && *arg == value;
}

TEST(ConsoleReplayCommands, Times) {
  EXPECT_THAT(ParseTimeUs("90s"), IsOkAndHolds(90'000'000));
  EXPECT_THAT(ParseTimeUs("1m30s"), IsOkAndHolds(90'000'000));
  EXPECT_THAT(ParseTimeUs("90"), IsOkAndHolds(90'000'000));
  EXPECT_THAT(ParseTimeUs("1.5"), IsOkAndHolds(1'500'000));
  EXPECT_THAT(ParseTimeUs("500ms"), IsOkAndHolds(500'000));
  EXPECT_THAT(ParseTimeUs("1h2m3s"), IsOkAndHolds(3'723'000'000));
  EXPECT_THAT(ParseTimeUs("2m"), IsOkAndHolds(120'000'000));
  EXPECT_THAT(ParseTimeUs(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseTimeUs("10x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown unit")));
  EXPECT_THAT(ParseTimeUs("10s1m"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("h, m, s")));
  EXPECT_THAT(ParseTimeUs("1m30"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing unit")));
  EXPECT_THAT(ParseTimeUs("1..2s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad number")));
}

TEST(ConsoleReplayCommands, Ranges) {
  EXPECT_THAT(ParseTimeRange("0-30s"), IsOkAndHolds(TimeRange{0, 30'000'000}));
  EXPECT_THAT(ParseTimeRange("1m-"), IsOkAndHolds(TimeRange{60'000'000, INT64_MAX}));
  EXPECT_THAT(ParseTimeRange("-10s"), IsOkAndHolds(TimeRange{0, 10'000'000}));
  EXPECT_THAT(ParseTimeRange("30s"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("FROM-TO")));
  EXPECT_THAT(ParseTimeRange("30s-30s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ends before it starts")));
}

TEST(ConsoleReplayCommands, SeekThroughTheCommandLine) {
  auto c = ParseCommand("seek 1m30s");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->local);
  EXPECT_FALSE(c->needs_confirm);
  EXPECT_EQ(c->text, "seek 1m30s");
  EXPECT_EQ(c->request.args, (nlohmann::json{{"us", 90'000'000}}));
  c = ParseCommand("seek -10s");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (nlohmann::json{{"delta_us", -10'000'000}}));
  c = ParseCommand("seek +1m");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (nlohmann::json{{"delta_us", 60'000'000}}));
  c = ParseCommand("seek step 1200");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (nlohmann::json{{"step", 1200}}));
  EXPECT_EQ(c->text, "seek step 1200");
  EXPECT_THAT(ParseCommand("seek"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("needs a target")));
  EXPECT_THAT(ParseCommand("seek step x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad step 'x'")));
  EXPECT_THAT(ParseCommand("seek 1s 2s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("one target")));
  EXPECT_THAT(ParseCommand("seek soon"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad time 'soon'")));
}

TEST(ConsoleReplayCommands, CompareThroughTheCommandLine) {
  auto c = ParseCommand("compare");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (nlohmann::json{{"around_us", kDefaultCompareWindowUs}}));
  EXPECT_EQ(c->text, "compare event");
  c = ParseCommand("compare event 1m");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (nlohmann::json{{"around_us", 60'000'000}}));
  c = ParseCommand("compare 0-30s 1m-");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args["a"], (nlohmann::json{0, 30'000'000}));
  EXPECT_EQ(c->request.args["b"], (nlohmann::json{60'000'000, INT64_MAX}));
  EXPECT_THAT(ParseCommand("compare 0-30s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("two windows")));
  EXPECT_THAT(ParseCommand("compare event 0s"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("longer than 0")));
}

TEST(ConsoleReplayCommands, Positions) {
  EXPECT_EQ(FormatPosition(0), "0.0s");
  EXPECT_EQ(FormatPosition(42'049'000), "42.0s");
  EXPECT_EQ(FormatPosition(90'000'000), "1m30.0s");
  EXPECT_EQ(FormatPosition(3'723'000'000), "1h02m03s");
  EXPECT_EQ(FormatPosition(-1'500'000), "-1.5s");
}

}  // namespace
}  // namespace sy::console
