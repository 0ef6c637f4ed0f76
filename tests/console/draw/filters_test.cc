// Headless tests of the `/` filters, the Requests sort and the Log's kind
// filter: the fixture in, exact text out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/draw/format.h"
#include "console/draw/views.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::FixtureSnapshot;
using ::sy::console::testing::RowsFit;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ConsoleDrawFilters, RequestsFilterKeepsMatchingRowsAndSaysSo) {
  ViewState v;
  v.requests_filter = "GEN";  // case-insensitive: the decoding request only
  const Grid g = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20});
  EXPECT_EQ(g.Row(0),
            PadRight("Requests: 2 running, 3 waiting  (step 1234)  retractions 1  sort id  "
                     "filter /GEN",
                     80));
  EXPECT_THAT(g.Row(2), StartsWith("running 2, 1 match "));
  EXPECT_THAT(g.Row(3), StartsWith("      40   0 ["));
  EXPECT_THAT(g.Row(4), StartsWith("waiting 3, 0 match "));
  EXPECT_THAT(g.Row(5), StartsWith("  none "));
  EXPECT_THAT(g.Row(6), StartsWith("finished 2, 0 match, newest first"));
  EXPECT_THAT(g.Row(7), StartsWith("  none match"));
  EXPECT_TRUE(RowsFit(g));

  v.requests_filter = "39";  // an id
  const std::string text = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20}).ToString();
  EXPECT_THAT(text, HasSubstr("      39   1  cancelled"));
  EXPECT_THAT(text, Not(HasSubstr("      38   1  length")));
  EXPECT_THAT(text, Not(HasSubstr("      40   0 [")));
  v.requests_filter = "waiting";  // a section name keeps the whole section
  const Grid w = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20});
  EXPECT_THAT(w.Row(4), StartsWith("waiting 3, 1 match "));
  EXPECT_THAT(w.Row(5), StartsWith("      43   - ["));
}

TEST(ConsoleDrawFilters, RequestsSortOrdersEachListAndTitlesIt) {
  ViewState v;
  v.requests_sort = RequestSort::kState;  // prefill before decoding
  Grid g = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(0), HasSubstr("  sort state"));
  EXPECT_THAT(g.Row(3), StartsWith("      41   1 ["));
  EXPECT_THAT(g.Row(4), StartsWith("      40   0 ["));
  // Finished by reason: cancelled before length.
  EXPECT_THAT(g.Row(8), StartsWith("finished 2, by state"));
  EXPECT_THAT(g.Row(10), StartsWith("      39   1  cancelled"));

  v.requests_sort = RequestSort::kAge;  // oldest first: 40 arrived first
  g = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(3), StartsWith("      40   0 ["));
  EXPECT_THAT(g.Row(10), StartsWith("      39   1  cancelled"));  // e2e 1.2 s
  v.requests_sort = RequestSort::kTtft;  // finished: the answered one first
  g = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(10), StartsWith("      38   1  length"));
  v.requests_sort = RequestSort::kProgress;  // 41 is 20/36 through prefill, 40 half done
  g = DrawRequests(FixtureSnapshot(), v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(3), StartsWith("      41   1 ["));
  EXPECT_THAT(g.Row(10), StartsWith("      38   1  length"));  // 16 tokens out
}

TEST(ConsoleDrawFilters, LogKindAndTextFilters) {
  Snapshot s = FixtureSnapshot();
  s.log.push_back(LogLine{3'000'000, LogLevel::kInfo, "switch EP -> TP done in 12.5 ms", "switch"});
  s.log.push_back(
      LogLine{4'000'000, LogLevel::kError, "rebalance failed: out of memory", "rebalance"});
  ViewState v;
  v.log_kind = LogKind::kSwitch;
  Grid g = DrawLog(s, v, Rect{0, 0, 70, 4});
  EXPECT_THAT(g.Row(0), StartsWith("Log: 1 lines of 6, kind switch"));
  EXPECT_THAT(g.Row(3), StartsWith("     3.0s switch EP -> TP done in 12.5 ms"));
  v.log_kind = LogKind::kError;  // errors and warnings
  g = DrawLog(s, v, Rect{0, 0, 70, 4});
  EXPECT_THAT(g.Row(2), StartsWith("  console < :trace loud failed"));
  EXPECT_THAT(g.Row(3), StartsWith("     4.0s rebalance failed: out of memory"));
  v.log_kind = LogKind::kCommand;
  v.log_filter = "PAUSE";
  g = DrawLog(s, v, Rect{0, 0, 70, 4});
  EXPECT_THAT(g.Row(0), StartsWith("Log: 2 lines of 6, kind command, filter /PAUSE"));
  EXPECT_THAT(g.Row(2), StartsWith("  console > :pause"));
  EXPECT_THAT(g.Row(3), StartsWith("     2.0s command pause done"));
  v.log_kind = LogKind::kRebalance;
  v.log_filter = "nothing like this";
  g = DrawLog(s, v, Rect{0, 0, 70, 4});
  EXPECT_THAT(g.Row(1), StartsWith("No line matches (k: kind, /: filter;"));
  EXPECT_TRUE(LogLineMatches(s.log[4], LogKind::kAll, ""));
  EXPECT_FALSE(LogLineMatches(s.log[4], LogKind::kRebalance, ""));
}

TEST(ConsoleDrawFilters, FilterLineAndInlineUsageOnTheCommandRow) {
  ViewState v;
  v.view = View::kLog;
  v.filter_active = true;
  v.filter_text = "swi";
  v.filter_cursor = 3;
  Grid g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  EXPECT_EQ(g.Row(22), PadRight("/swi   filter Log: Enter applies, empty clears, Esc cancels", 80));
  EXPECT_EQ(g.at(4, 22).style.attrs, kReverse);  // the cursor
  v = ViewState{};
  v.command_active = true;
  v.command_text = "trace ";
  v.command_cursor = 6;
  g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  EXPECT_THAT(g.Row(22),
              StartsWith(":trace    trace off|summary|full  set the trace level (full adds"));
}

}  // namespace
}  // namespace sy::console
