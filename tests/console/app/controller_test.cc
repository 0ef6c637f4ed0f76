#include "console/app/controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sy::console {
namespace {

using ::testing::HasSubstr;

Effects Press(Controller& c, const std::string& key) { return c.HandleKey(Key{key}); }

Effects TypeLine(Controller& c, const std::string& line) {
  Press(c, ":");
  for (char ch : line) Press(c, ch == ' ' ? "Space" : std::string(1, ch));
  return Press(c, "Enter");
}

TEST(ConsoleController, ColonPauseEnterSendsPause) {
  Controller c(false);
  EXPECT_FALSE(Press(c, ":").send);
  EXPECT_TRUE(c.view().command_active);
  for (const char* k : {"p", "a", "u", "s", "e"}) Press(c, k);
  EXPECT_EQ(c.view().command_text, "pause");
  const Effects fx = Press(c, "Enter");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.cmd, "pause");
  EXPECT_FALSE(c.view().command_active);
  EXPECT_EQ(c.view().message, "sent :pause …");
}

TEST(ConsoleController, KeysTypedIntoTheCommandLineDoNotAct) {
  Controller c(false);
  Press(c, ":");
  EXPECT_FALSE(Press(c, "q").quit);  // 'q' is text here
  Press(c, "Backspace");
  Press(c, "2");
  EXPECT_EQ(c.view().view, View::kOverview);
  Press(c, "Esc");
  EXPECT_FALSE(c.view().command_active);
  EXPECT_TRUE(Press(c, "q").quit);
}

TEST(ConsoleController, BadCommandShowsErrorAndSendsNothing) {
  Controller c(false);
  Effects fx = TypeLine(c, "trace loud");
  EXPECT_FALSE(fx.send);
  EXPECT_TRUE(c.view().message_error);
  EXPECT_EQ(c.view().message, "bad trace level 'loud': expected off|summary|full");
  fx = TypeLine(c, "frobnicate");
  EXPECT_FALSE(fx.send);
  EXPECT_THAT(c.view().message, HasSubstr("unknown command 'frobnicate'"));
}

TEST(ConsoleController, StopAsksForConfirmation) {
  Controller c(false);
  Effects fx = TypeLine(c, "stop");
  EXPECT_FALSE(fx.send);
  EXPECT_EQ(c.view().confirm, "Really stop the engine? (y/n)");
  fx = Press(c, "n");
  EXPECT_FALSE(fx.send);
  EXPECT_TRUE(c.view().confirm.empty());
  EXPECT_EQ(c.view().message, ":stop cancelled");

  TypeLine(c, "stop");
  fx = Press(c, "y");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.cmd, "stop");

  fx = TypeLine(c, "stop!");  // no question
  ASSERT_TRUE(fx.send);
  EXPECT_TRUE(c.view().confirm.empty());
}

TEST(ConsoleController, ViewsHelpAndQuit) {
  Controller c(false);
  Press(c, "2");
  EXPECT_EQ(c.view().view, View::kKernels);
  Press(c, "Tab");
  EXPECT_EQ(c.view().view, View::kMemory);
  Press(c, "5");
  Press(c, "Tab");  // Requests comes after Log
  EXPECT_EQ(c.view().view, View::kRequests);
  Press(c, "Tab");
  EXPECT_EQ(c.view().view, View::kOverview);
  Press(c, "BackTab");
  EXPECT_EQ(c.view().view, View::kRequests);
  Press(c, "BackTab");
  EXPECT_EQ(c.view().view, View::kLog);
  Press(c, "?");
  EXPECT_TRUE(c.view().help);
  EXPECT_FALSE(Press(c, "q").quit);  // q closes help first
  EXPECT_FALSE(c.view().help);
  Press(c, "?");
  Press(c, "Esc");
  EXPECT_FALSE(c.view().help);
  EXPECT_TRUE(TypeLine(c, "quit").quit);
  TypeLine(c, "help");
  EXPECT_TRUE(c.view().help);
}

TEST(ConsoleController, ReplayKeysAndNoCommandsInReplay) {
  Controller c(true);
  EXPECT_EQ(Press(c, "Space").replay, ReplayAction::kPlayPause);
  EXPECT_EQ(Press(c, "+").replay, ReplayAction::kFaster);
  EXPECT_EQ(Press(c, "Left").replay, ReplayAction::kSeekBack);
  EXPECT_EQ(Press(c, "End").replay, ReplayAction::kSeekEnd);
  const Effects fx = TypeLine(c, "pause");
  EXPECT_FALSE(fx.send);
  EXPECT_TRUE(c.view().message_error);
  Controller live(false);
  EXPECT_FALSE(Press(live, "Space").replay);
}

TEST(ConsoleController, HistoryThroughTheController) {
  Controller c(false);
  TypeLine(c, "status");
  Press(c, ":");
  Press(c, "Up");
  EXPECT_EQ(c.view().command_text, "status");
  EXPECT_TRUE(Press(c, "Enter").send);
}

TEST(ConsoleController, LogScrolling) {
  Controller c(false);
  Press(c, "PageUp");
  Press(c, "Up");
  EXPECT_EQ(c.view().log_scroll, 11);
  Press(c, "PageDown");
  Press(c, "PageDown");
  EXPECT_EQ(c.view().log_scroll, 0);
}

TEST(ConsoleController, ExpertsViewScrollsAndPicksTheSlotMapLayer) {
  Controller c(false);
  Press(c, "4");
  ASSERT_EQ(c.view().view, View::kExperts);
  Press(c, "PageDown");
  Press(c, "Down");
  EXPECT_EQ(c.view().experts_scroll, 11);  // rows down from the top
  EXPECT_EQ(c.view().log_scroll, 0);       // the Log keeps its place
  Press(c, "Up");
  Press(c, "PageUp");
  Press(c, "Up");
  EXPECT_EQ(c.view().experts_scroll, 0);
  EXPECT_EQ(c.view().expert_layer, -1);  // least balanced layer
  Press(c, "]");
  Press(c, "]");
  EXPECT_EQ(c.view().expert_layer, 1);
  Press(c, "[");
  Press(c, "[");
  Press(c, "[");
  EXPECT_EQ(c.view().expert_layer, -1);  // back to following the worst
}

// The plan's question arrives with the dry run's reply: 'y' sends the
// apply, anything else drops it; while a line is being typed it waits.
TEST(ConsoleController, AskedQuestionSendsOnYesOnly) {
  Controller c(false);
  const Effects dry = TypeLine(c, "rebalance 64");
  ASSERT_TRUE(dry.send);
  EXPECT_TRUE(dry.send->preview);
  EXPECT_EQ(dry.send->request.args["dry_run"], true);
  EXPECT_TRUE(c.view().confirm.empty());  // nothing to confirm before the plan

  c.Ask("Apply: 3 experts? (y/n)", ConfirmedRebalance(*dry.send));
  EXPECT_EQ(c.view().confirm, "Apply: 3 experts? (y/n)");
  Effects fx = Press(c, "y");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->text, "rebalance! 64");
  EXPECT_EQ(fx.send->request.args["dry_run"], false);
  EXPECT_TRUE(c.view().confirm.empty());

  c.Ask("Apply: 3 experts? (y/n)", ConfirmedRebalance(*dry.send));
  fx = Press(c, "n");
  EXPECT_FALSE(fx.send);
  EXPECT_EQ(c.view().message, ":rebalance! 64 cancelled");

  // Typing: the question waits until the line closes, so a 'y' typed into
  // the command line is text, not an answer.
  Press(c, ":");
  Press(c, "y");
  c.Ask("Apply? (y/n)", ConfirmedRebalance(*dry.send));
  EXPECT_TRUE(c.view().confirm.empty());
  EXPECT_EQ(c.view().command_text, "y");
  Press(c, "Esc");
  EXPECT_EQ(c.view().confirm, "Apply? (y/n)");
  EXPECT_TRUE(Press(c, "y").send);
}

TEST(ConsoleController, RebalanceBangSendsAtOnceAndAutoIsPlain) {
  Controller c(false);
  Effects fx = TypeLine(c, "rebalance!");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.args["dry_run"], false);
  EXPECT_TRUE(c.view().confirm.empty());
  fx = TypeLine(c, "rebalance_auto 100 0.1");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.cmd, "rebalance_auto");
}

// `:switch`, `:policy`, `:calibrate` typed key by key: Tab completes; Enter
// asks y/n for `:switch` (disruptive) and sends the others at once; a bad
// value stays on the line as an error.
TEST(ConsoleController, SwitchPolicyCalibrateFromTheCommandLine) {
  Controller c(false);
  Press(c, ":");
  for (const char* k : {"s", "w"}) Press(c, k);
  Press(c, "Tab");
  EXPECT_EQ(c.view().command_text, "switch ");
  Press(c, "t");
  Press(c, "Tab");
  EXPECT_EQ(c.view().command_text, "switch tp");
  Effects fx = Press(c, "Enter");
  EXPECT_FALSE(fx.send);
  EXPECT_EQ(c.view().confirm, "Really switch the engine? (y/n)");
  fx = Press(c, "y");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.cmd, "switch");
  EXPECT_EQ(fx.send->request.args, (nlohmann::json{{"to", "tp"}}));
  EXPECT_TRUE(c.view().confirm.empty());
  EXPECT_EQ(c.view().message, "sent :switch tp …");

  fx = TypeLine(c, "policy auto t_high=48");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.args, (nlohmann::json{{"mode", "auto"}, {"t_high", 48}}));

  fx = TypeLine(c, "policy t_high=32 t_low=40");
  EXPECT_FALSE(fx.send);
  EXPECT_TRUE(c.view().message_error);
  EXPECT_EQ(c.view().message,
            "t_low 40 above t_high 32: the low threshold must not exceed the high one");

  fx = TypeLine(c, "calibrate 1,8,32 apply");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.args, (nlohmann::json{{"batches", {1, 8, 32}}, {"apply", true}}));
  fx = TypeLine(c, "calibrate 1");
  EXPECT_FALSE(fx.send);
  EXPECT_THAT(c.view().message, HasSubstr("at least 2 batch sizes"));
}

TEST(ConsoleController, SwitchIsNotSentInReplay) {
  Controller c(true);
  const Effects fx = TypeLine(c, "switch ep");
  EXPECT_FALSE(fx.send);
  EXPECT_EQ(c.view().message, "replay: ':switch ep' not sent (no engine attached)");
}

}  // namespace
}  // namespace sy::console
