// Headless tests of the Requests panel: the fixture's running, waiting and
// finished requests in, exact text out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/draw/format.h"
#include "console/draw/views.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::FixtureSnapshot;
using ::sy::console::testing::Repeat;
using ::sy::console::testing::RowsFit;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ConsoleDrawRequests, RunningWaitingAndFinishedWithProgress) {
  const Grid g = DrawRequests(FixtureSnapshot(), ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_EQ(g.Row(0),
            PadRight("Requests: 2 running, 3 waiting  (step 1234)  retractions 1  sort id", 80));
  EXPECT_EQ(g.Row(1), "      id dev " + PadRight("progress", 29) + " state            cached  pre" +
                          "      age");
  EXPECT_THAT(g.Row(2), StartsWith("running 2 "));
  // Decoding: 8 of 16 new tokens; bar 29 wide, 27 inside, half full.
  EXPECT_EQ(g.Row(3), "      40   0 [" + Repeat("█", 14) + Repeat("░", 13) +
                          "] gen 8/16             16    0    1.50s");
  // In prefill (its prompt grew after a retraction): 20 of 36 computed.
  EXPECT_EQ(g.Row(4), "      41   1 [" + Repeat("█", 15) + Repeat("░", 12) +
                          "] prefill 20/36         0    1 750.00ms");
  EXPECT_EQ(g.at(14, 3).style.fg, Color::kGreen);   // decode
  EXPECT_EQ(g.at(14, 4).style.fg, Color::kCyan);    // prefill
  EXPECT_EQ(g.at(70, 4).style.fg, Color::kYellow);  // preempted once
  EXPECT_THAT(g.Row(5), StartsWith("waiting 3 "));
  EXPECT_THAT(g.Row(6), StartsWith("      43   - [" + Repeat("░", 27) + "] queued  "));
  EXPECT_THAT(g.Row(6), EndsWith("  10.00ms"));
  EXPECT_THAT(g.Row(7), StartsWith("  … 2 more "));  // the engine listed 1 of 3
  EXPECT_THAT(g.Row(8), StartsWith("finished 2, newest first"));
  EXPECT_EQ(g.Row(9), PadRight("      id dev  finish     prompt   out      TTFT      TPOT       e2e"
                               "  cached  pre",
                               80));
  // Newest first; cancelled before its first token: no TTFT.
  EXPECT_EQ(g.Row(10),
            PadRight("      39   1  cancelled      32     0         -         -     1.20s"
                     "       0    2",
                     80));
  EXPECT_EQ(g.Row(11),
            PadRight("      38   1  length         32    16     900us     210us    4.05ms"
                     "      16    0",
                     80));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawRequests, LongListsAreCutWithACount) {
  Snapshot s = FixtureSnapshot();
  const telemetry::RequestProgress one = s.requests.running[0];
  s.requests.running.clear();
  for (int i = 0; i < 256; ++i) {
    s.requests.running.push_back(one);
    s.requests.running.back().id = 100 + i;
  }
  s.requests.running_total = 300;  // the engine capped its list at 256
  // 16 rows: the title and five header rows leave 10; running gets half
  // of them and what waiting and finished (2 each) leave over.
  const Grid g = DrawRequests(s, ViewState{}, Rect{0, 0, 80, 16});
  EXPECT_THAT(g.Row(2), StartsWith("running 300 "));
  EXPECT_THAT(g.Row(3), StartsWith("     100   0 ["));
  EXPECT_THAT(g.Row(7), StartsWith("     104   0 ["));
  EXPECT_THAT(g.Row(8), StartsWith("  … 295 more "));
  EXPECT_THAT(g.Row(9), StartsWith("waiting 3 "));
  EXPECT_THAT(g.Row(10), StartsWith("      43   - ["));
  EXPECT_THAT(g.Row(11), StartsWith("  … 2 more "));
  EXPECT_THAT(g.ToString(), HasSubstr("finished 2, newest first"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawRequests, BeforeAnySnapshotFinishedStillShow) {
  Snapshot s = FixtureSnapshot();
  s.have_requests = false;
  s.requests = {};
  s.retractions = 0;
  const Grid g = DrawRequests(s, ViewState{}, Rect{0, 0, 80, 12});
  EXPECT_THAT(g.Row(0), StartsWith("Requests  "));
  EXPECT_THAT(g.Row(1), StartsWith("No requests snapshot yet"));
  EXPECT_THAT(g.Row(2), StartsWith("finished 2, newest first"));
  EXPECT_THAT(g.Row(4), StartsWith("      39   1  cancelled"));
  EXPECT_THAT(g.ToString(), Not(HasSubstr("running")));
  const Grid empty = DrawRequests(Snapshot{}, ViewState{}, Rect{0, 0, 60, 6});
  EXPECT_THAT(empty.Row(2), StartsWith("finished 0, newest first"));
  EXPECT_THAT(empty.Row(3), StartsWith("  none yet"));
  for (int w : {0, 1, 5, 30}) {
    for (int h : {0, 1, 3, 6}) {
      const Grid t = DrawRequests(FixtureSnapshot(), ViewState{}, Rect{0, 0, w, h});
      EXPECT_EQ(t.width(), w);
      EXPECT_EQ(t.height(), h);
    }
  }
}

}  // namespace
}  // namespace sy::console
