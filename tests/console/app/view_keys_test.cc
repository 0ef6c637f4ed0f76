// The Controller driven key by key through the `/` filter line, the
// Requests sort, the Log's kind filter, the Kernels view keys, and the
// command line's history and `!` confirmation rules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/app/controller.h"

namespace sy::console {
namespace {

using ::testing::HasSubstr;

Effects Press(Controller& c, const std::string& key) { return c.HandleKey(Key{key}); }

void Type(Controller& c, const std::string& text) {
  for (char ch : text) Press(c, ch == ' ' ? "Space" : std::string(1, ch));
}

TEST(ConsoleViewKeys, SlashFiltersRequestsEscCancelsEmptyClears) {
  Controller c(false);
  Press(c, "6");
  Press(c, "/");
  EXPECT_TRUE(c.view().filter_active);
  Type(c, "gen");
  EXPECT_EQ(c.view().filter_text, "gen");
  EXPECT_EQ(c.view().filter_cursor, 3);
  EXPECT_FALSE(Press(c, "q").quit);  // text while the line is open
  Press(c, "Backspace");
  Press(c, "Enter");
  EXPECT_FALSE(c.view().filter_active);
  EXPECT_EQ(c.view().requests_filter, "gen");
  EXPECT_EQ(c.view().message, "Requests filtered by /gen");
  // Reopened, the line holds the filter; Esc keeps it.
  Press(c, "/");
  EXPECT_EQ(c.view().filter_text, "gen");
  Press(c, "x");
  Press(c, "Esc");
  EXPECT_EQ(c.view().requests_filter, "gen");
  // Emptied and applied: cleared.
  Press(c, "/");
  for (int i = 0; i < 3; ++i) Press(c, "Backspace");
  Press(c, "Enter");
  EXPECT_EQ(c.view().requests_filter, "");
  EXPECT_EQ(c.view().message, "Requests filter cleared");
  // Tab does not complete commands here; Up recalls the last filter.
  Press(c, "/");
  Press(c, "Tab");
  EXPECT_EQ(c.view().filter_text, "");
  Press(c, "Up");
  EXPECT_EQ(c.view().filter_text, "gen");
  Press(c, "Esc");
}

TEST(ConsoleViewKeys, SlashFiltersTheLogAndKCyclesKinds) {
  Controller c(false);
  Press(c, "5");
  c.mutable_view().log_scroll = 7;
  Press(c, "/");
  Type(c, "switch");
  Press(c, "Enter");
  EXPECT_EQ(c.view().log_filter, "switch");
  EXPECT_EQ(c.view().requests_filter, "");
  EXPECT_EQ(c.view().log_scroll, 0);
  for (LogKind k :
       {LogKind::kSwitch, LogKind::kRebalance, LogKind::kCommand, LogKind::kError, LogKind::kAll}) {
    Press(c, "k");
    EXPECT_EQ(c.view().log_kind, k);
  }
  // In another view '/' and 'k' only say where they act.
  Press(c, "1");
  Press(c, "/");
  EXPECT_FALSE(c.view().filter_active);
  EXPECT_EQ(c.view().message, "/ filters the Requests and Log views");
  Press(c, "k");
  EXPECT_EQ(c.view().log_kind, LogKind::kAll);
  EXPECT_EQ(c.view().message, "k (kind) acts in the Log view");
}

TEST(ConsoleViewKeys, SCyclesTheRequestsSort) {
  Controller c(false);
  Press(c, "6");
  std::vector<std::string> names;
  for (int i = 0; i < kRequestSortCount; ++i) {
    Press(c, "s");
    names.push_back(RequestSortName(c.view().requests_sort));
  }
  EXPECT_THAT(names, ::testing::ElementsAre("state", "progress", "ttft", "tpot", "age", "id"));
}

TEST(ConsoleViewKeys, KernelsStepZoomPanAndTable) {
  Controller c(false);
  Press(c, "2");
  Press(c, ",");
  Press(c, ",");
  Press(c, ".");
  EXPECT_EQ(c.view().kernel_nav, -1);
  c.mutable_view().kernel_step = 1200;  // as ResolveKernelStep would pin
  c.mutable_view().kernel_nav = 0;
  Press(c, "f");
  EXPECT_EQ(c.view().kernel_step, -1);
  EXPECT_EQ(c.view().kernel_nav, 0);

  Press(c, "z");  // x2, the middle half
  EXPECT_EQ(c.view().kernel_zoom, 1);
  EXPECT_EQ(c.view().kernel_pan, 1);
  Press(c, "z");  // x4, still centred: 3 quarter-windows... of 8 halves
  EXPECT_EQ(c.view().kernel_zoom, 2);
  EXPECT_EQ(c.view().kernel_pan, 3);
  for (int i = 0; i < 10; ++i) Press(c, "}");
  EXPECT_EQ(c.view().kernel_pan, 6);  // the last window
  Press(c, "{");
  EXPECT_EQ(c.view().kernel_pan, 5);
  Press(c, "Z");
  EXPECT_EQ(c.view().kernel_zoom, 1);
  EXPECT_EQ(c.view().kernel_pan, 2);
  Press(c, "Z");
  Press(c, "Z");  // already whole
  EXPECT_EQ(c.view().kernel_zoom, 0);
  EXPECT_EQ(c.view().kernel_pan, 0);

  Press(c, "g");
  EXPECT_EQ(c.view().kernel_table, KernelTable::kLayer);
  Press(c, "g");
  EXPECT_EQ(c.view().kernel_table, KernelTable::kKind);
  Press(c, "g");
  EXPECT_EQ(c.view().kernel_table, KernelTable::kTop);
  Press(c, "3");
  Press(c, "z");
  EXPECT_EQ(c.view().kernel_zoom, 0);
  EXPECT_EQ(c.view().message, "z (zoom) acts in the Kernels view");
}

TEST(ConsoleViewKeys, DisruptiveCommandsAskUnlessBang) {
  Controller c(false);
  for (const char* line : {"switch tp", "stop"}) {
    Press(c, ":");
    Type(c, line);
    const Effects fx = Press(c, "Enter");
    EXPECT_FALSE(fx.send) << line;
    EXPECT_THAT(c.view().confirm, HasSubstr("(y/n)")) << line;
    EXPECT_FALSE(Press(c, "n").send);
    EXPECT_EQ(c.view().message, ":" + std::string(line) + " cancelled");
  }
  for (const char* line : {"switch! ep", "stop!"}) {
    Press(c, ":");
    Type(c, line);
    const Effects fx = Press(c, "Enter");
    ASSERT_TRUE(fx.send) << line;
    EXPECT_TRUE(c.view().confirm.empty());
  }
  // `:rebalance` without '!' is a dry run whose plan is the question.
  Press(c, ":");
  Type(c, "rebalance");
  Effects fx = Press(c, "Enter");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.send->request.args["dry_run"], true);
  // History: Up walks back through what was typed.
  Press(c, ":");
  Press(c, "Up");
  EXPECT_EQ(c.view().command_text, "rebalance");
  Press(c, "Up");
  EXPECT_EQ(c.view().command_text, "stop!");
  Press(c, "Down");
  Press(c, "Down");
  EXPECT_EQ(c.view().command_text, "");
  Press(c, "Esc");
}

}  // namespace
}  // namespace sy::console
