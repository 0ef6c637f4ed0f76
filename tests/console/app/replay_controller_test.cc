// The controller's replay navigation: `:seek` / `:compare` become effects for
// the replay loop (and are refused live), n / N jump between events, Esc
// closes the compare overlay, and help lists all of it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/app/controller.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

using ::testing::HasSubstr;

void Type(Controller& c, const std::string& line) {
  c.HandleKey(Key{":"});
  for (char ch : line) c.HandleKey(Key{ch == ' ' ? "Space" : std::string(1, ch)});
}

TEST(ConsoleReplayController, SeekAndCompareAreReplayEffects) {
  Controller c(/*replay_mode=*/true);
  Type(c, "seek 1m30s");
  Effects fx = c.HandleKey(Key{"Enter"});
  ASSERT_TRUE(fx.replay_command.has_value());
  EXPECT_EQ(fx.replay_command->name, "seek");
  EXPECT_EQ(fx.replay_command->request.args["us"], 90'000'000);
  EXPECT_FALSE(fx.send.has_value());
  Type(c, "compare 0-30s 30s-1m");
  fx = c.HandleKey(Key{"Enter"});
  ASSERT_TRUE(fx.replay_command.has_value());
  EXPECT_EQ(fx.replay_command->name, "compare");
  Type(c, "seek soon");
  fx = c.HandleKey(Key{"Enter"});
  EXPECT_FALSE(fx.replay_command.has_value());
  EXPECT_TRUE(c.view().message_error);
  EXPECT_THAT(c.view().message, HasSubstr("bad time 'soon'"));
}

TEST(ConsoleReplayController, SeekIsRefusedLive) {
  Controller c(/*replay_mode=*/false);
  Type(c, "seek 10s");
  const Effects fx = c.HandleKey(Key{"Enter"});
  EXPECT_FALSE(fx.replay_command.has_value());
  EXPECT_FALSE(fx.send.has_value());
  EXPECT_EQ(c.view().message, ":seek works in replay only (moe-console --replay FILE)");
  EXPECT_FALSE(c.HandleKey(Key{"n"}).replay.has_value());
}

TEST(ConsoleReplayController, EventKeysAndCompareOverlay) {
  Controller c(/*replay_mode=*/true);
  EXPECT_EQ(c.HandleKey(Key{"n"}).replay, ReplayAction::kNextEvent);
  EXPECT_EQ(c.HandleKey(Key{"N"}).replay, ReplayAction::kPrevEvent);
  c.mutable_view().compare = true;
  c.HandleKey(Key{"Esc"});
  EXPECT_FALSE(c.view().compare);
  ViewState v;
  v.replay = true;
  const std::string help = DrawHelp(v, Rect{0, 0, 100, HelpHeight(v, 100)}).ToString();
  EXPECT_THAT(help, HasSubstr("n/N"));
  EXPECT_THAT(help, HasSubstr("next / previous event"));
  EXPECT_THAT(help, HasSubstr("replay: go to 1m30s, +10s, or a step"));
}

}  // namespace
}  // namespace sy::console
