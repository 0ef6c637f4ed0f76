#include "console/input/keymap.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace sy::console {
namespace {

TEST(ConsoleKeymap, ViewKeysAndGlobals) {
  EXPECT_EQ(LookupKey("1", false), Action::kViewOverview);
  EXPECT_EQ(LookupKey("5", false), Action::kViewLog);
  EXPECT_EQ(LookupKey("6", false), Action::kViewRequests);
  EXPECT_EQ(LookupKey("Tab", false), Action::kNextView);
  EXPECT_EQ(LookupKey(":", false), Action::kCommandLine);
  EXPECT_EQ(LookupKey("?", false), Action::kHelp);
  EXPECT_EQ(LookupKey("q", false), Action::kQuit);
  EXPECT_EQ(LookupKey("Esc", false), Action::kClose);
  EXPECT_EQ(LookupKey("x", false), std::nullopt);
}

TEST(ConsoleKeymap, ReplayKeysOnlyInReplay) {
  EXPECT_EQ(LookupKey("Space", false), std::nullopt);
  EXPECT_EQ(LookupKey("Space", true), Action::kPlayPause);
  EXPECT_EQ(LookupKey("+", true), Action::kFaster);
  EXPECT_EQ(LookupKey("-", true), Action::kSlower);
  EXPECT_EQ(LookupKey("Left", true), Action::kSeekBack);
  EXPECT_EQ(LookupKey("Right", true), Action::kSeekForward);
  EXPECT_EQ(LookupKey("Home", true), Action::kSeekStart);
  EXPECT_EQ(LookupKey("End", true), Action::kSeekEnd);
}

TEST(ConsoleKeymap, EveryKeyIsBoundOnceAndDocumented) {
  std::set<std::string> seen;
  for (const KeyBinding& b : KeyTable()) {
    EXPECT_TRUE(seen.insert(std::string(b.key)).second) << b.key;
    EXPECT_FALSE(b.help.empty()) << b.key;
    // Fits the help overlay's key column and its 2-column layout at 80x24.
    EXPECT_LE(b.key.size(), 8u) << b.key;
    EXPECT_LE(b.help.size(), 28u) << b.key;
  }
}

// The Requests, Log and Kernels view keys, live and in replay.
TEST(ConsoleKeymap, ViewKeys) {
  for (bool replay : {false, true}) {
    EXPECT_EQ(LookupKey("/", replay), Action::kFilter);
    EXPECT_EQ(LookupKey("s", replay), Action::kSortRequests);
    EXPECT_EQ(LookupKey("k", replay), Action::kLogKind);
    EXPECT_EQ(LookupKey(",", replay), Action::kOlderStep);
    EXPECT_EQ(LookupKey(".", replay), Action::kNewerStep);
    EXPECT_EQ(LookupKey("f", replay), Action::kFollowStep);
    EXPECT_EQ(LookupKey("z", replay), Action::kZoomIn);
    EXPECT_EQ(LookupKey("Z", replay), Action::kZoomOut);
    EXPECT_EQ(LookupKey("{", replay), Action::kPanLeft);
    EXPECT_EQ(LookupKey("}", replay), Action::kPanRight);
    EXPECT_EQ(LookupKey("g", replay), Action::kKernelTable);
  }
}

}  // namespace
}  // namespace sy::console
