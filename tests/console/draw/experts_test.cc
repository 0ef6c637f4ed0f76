// Headless tests of the Experts view: a constructed Snapshot in, exact text
// and styles out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/draw/theme.h"
#include "console/draw/views.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::EplbFixtureSnapshot;
using ::sy::console::testing::FixtureSnapshot;
using ::sy::console::testing::RowsFit;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// An engine before EPLB, drawn from the plain fixture: the token heatmap,
// no balancedness column, then the hottest experts and tokens per device.
TEST(ConsoleDrawExperts, HeatmapHottestAndDeviceTotals) {
  const Grid g = DrawExperts(FixtureSnapshot(), ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Experts, last 64 steps, device max/mean 1.01x"));
  EXPECT_THAT(g.Row(1), StartsWith("Routed tokens per layer x expert (█ = hottest)"));
  EXPECT_THAT(g.Row(2), StartsWith("     0           4 "));
  // Layer 0: 100 is the hottest cell; 50 = half, 25 = quarter, 10 < quarter.
  // Eight experts at 80 columns get 3-column cells.
  EXPECT_THAT(g.Row(3), StartsWith("L0   ██ ·· ▓▓ ▒▒ ·· ·· ·· ░░  "));
  EXPECT_THAT(g.Row(5), StartsWith("L2   ·· ·· ·· ·· ██ ██ ·· ··  "));
  EXPECT_EQ(g.at(5, 3).style.fg, Color::kRed);  // the hottest cell
  EXPECT_THAT(g.Row(7), StartsWith(std::string(80, ' ')));
  EXPECT_THAT(g.Row(8), StartsWith("Hottest experts (tokens, share of layer, replicas)"));
  // Three columns of 26 at 80, ranked left to right; ties by layer then
  // expert; share of the layer's tokens (L0 routed 185); no placement, so
  // no replica counts.
  EXPECT_EQ(g.Row(9),
            "L0 e0      100  54.1%     L2 e4       80  50.0%     L2 e5       80  50.0%"
            "       ");
  EXPECT_THAT(g.Row(10), StartsWith("L0 e2       50  27.0%     L0 e3       25  13.5%     L0 e7"));
  EXPECT_THAT(g.Row(12), StartsWith("Tokens per device, all layers"));
  EXPECT_THAT(g.Row(13), StartsWith("dev0  "));
  EXPECT_THAT(g.Row(13), HasSubstr("235   50.5%"));
  EXPECT_THAT(g.Row(14), HasSubstr("230   49.5%"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawExperts, ManyExpertsAreGroupedToFit) {
  Snapshot s = FixtureSnapshot();
  s.expert_counts = {std::vector<int64_t>(256, 1)};
  const Grid g = DrawExperts(s, ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(2), StartsWith("x4   0"));  // 256 experts over 75 columns
  EXPECT_EQ(g.Row(3).substr(0, 5) + "", "L0   ");
  EXPECT_TRUE(RowsFit(g));
}

// With a placement: the balancedness column and trend beside the heatmap,
// the latest rebalance, and the devices x slots map of the least balanced
// layer.
TEST(ConsoleDrawExperts, BalancednessSlotMapAndRebalance) {
  const Grid g = DrawExperts(EplbFixtureSnapshot(), ViewState{}, Rect{0, 0, 100, 30});
  EXPECT_THAT(g.Row(0), StartsWith("Experts, last 64 steps: balancedness 0.88 (worst L2 0.67), "
                                   "device max/mean 1.01x"));
  EXPECT_THAT(g.Row(1), StartsWith("rebalanced: measured 0.64 -> 0.91, MoE 4.10ms -> 3.20ms/step, "
                                   "5 experts, pause 0.80ms; auto every 5"));
  EXPECT_THAT(DrawExperts(EplbFixtureSnapshot(), ViewState{}, Rect{0, 0, 140, 30}).Row(1),
              HasSubstr("auto every 500 steps, gain > 0.05   "));
  EXPECT_EQ(g.at(0, 1).style, theme::kGood);
  // Balancedness right after the 8 x 3 heatmap columns, at x 30: " 0.84 ",
  // then the trend to the right edge.
  EXPECT_THAT(g.Row(3), HasSubstr(" bal  trend/s"));
  EXPECT_THAT(g.Row(4), HasSubstr(" 0.84 "));
  EXPECT_THAT(g.Row(6), HasSubstr(" 0.67 "));
  EXPECT_THAT(g.Row(4), StartsWith("L0   ██ ·· ▓▓ ▒▒ ·· ·· ·· ░░   0.84 "));
  EXPECT_EQ(g.at(31, 6).style, theme::kBad);   // 0.67 < 0.7
  EXPECT_EQ(g.at(31, 5).style, theme::kGood);  // 1.00
  // The trend is right-aligned, one block per second scaled to 1.0.
  EXPECT_THAT(g.Row(4), EndsWith("▄▅▇"));
  EXPECT_THAT(g.Row(6), EndsWith("█▆▄▆"));

  EXPECT_THAT(g.Row(9), StartsWith("Slots of L2 (least balanced; [ ] pick layer): expert in each "
                                   "slot, by tokens"));
  // Cells 3 wide (ids < 100); then the device's tokens in the layer.
  EXPECT_THAT(g.Row(10), StartsWith("dev0   0  1  2  3  4  │    40  25.0% "));
  EXPECT_THAT(g.Row(11), StartsWith("dev1   5  6  7  4  5  │   120  75.0% "));
  // e4 on device 0 is as hot as any slot of the layer, and replicated.
  const Style hot = g.at(19, 10).style;
  EXPECT_EQ(hot.fg, Color::kRed);
  EXPECT_EQ(hot.attrs & kUnderline, kUnderline);
  EXPECT_EQ(g.at(7, 10).style, theme::kDimmed);  // e0: no tokens in L2
  EXPECT_EQ(g.at(7, 11).style.fg, Color::kRed);  // e5, both replicas on device 1
  EXPECT_THAT(g.Row(12), StartsWith("10 slots = 8 experts + 2 redundant, 5 per device; "
                                    "replicas: e4×2 e5×2"));
  EXPECT_THAT(g.Row(14), StartsWith("Hottest experts"));
  EXPECT_THAT(g.Row(15), StartsWith("L0 e0      100  54.1% ×2  L2 e4       80  50.0% ×2  L2 e5"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawExperts, BracketsPickTheSlotMapLayer) {
  ViewState v;
  v.expert_layer = 0;
  Grid g = DrawExperts(EplbFixtureSnapshot(), v, Rect{0, 0, 100, 30});
  EXPECT_THAT(g.Row(9), StartsWith("Slots of L0 ([ ] pick layer)"));
  EXPECT_THAT(g.Row(10), StartsWith("dev0   0  1  3  5  6  │    75  40.5% "));
  EXPECT_THAT(g.Row(11), StartsWith("dev1   0  2  4  7  2  │   110  59.5% "));
  EXPECT_THAT(g.Row(12), HasSubstr("replicas: e0×2 e2×2"));
  v.expert_layer = 99;  // past the last layer: the last one
  g = DrawExperts(EplbFixtureSnapshot(), v, Rect{0, 0, 100, 30});
  EXPECT_THAT(g.Row(9), StartsWith("Slots of L3 "));
}

// At 80x20 the view does not fit: the title stays, Up/Down scroll the rest
// and the last row says where the window is.
TEST(ConsoleDrawExperts, ScrollsWhenTallerThanTheArea) {
  const Snapshot s = EplbFixtureSnapshot();
  ViewState v;
  Grid g = DrawExperts(s, v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Experts, last 64 steps"));
  EXPECT_THAT(g.Row(19), StartsWith("── rows 2-19 of "));
  EXPECT_THAT(g.Row(19), HasSubstr("Down/PageDown for more"));
  const int max = ExpertsMaxScroll(s, v, 80, 24);
  EXPECT_GT(max, 0);
  v.experts_scroll = 1000;  // clamped to the end
  g = DrawExperts(s, v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Experts, last 64 steps"));
  EXPECT_THAT(g.Row(18), StartsWith("dev1  "));  // the last row of content
  EXPECT_THAT(g.Row(19), HasSubstr("Up/PageUp back"));
  EXPECT_THAT(g.Row(19), Not(HasSubstr("for more")));
  v.experts_scroll = max;
  EXPECT_EQ(DrawExperts(s, v, Rect{0, 0, 80, 20}).ToString(), g.ToString());
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawExperts, RebalanceInProgressAndFailure) {
  Snapshot s = EplbFixtureSnapshot();
  s.rebalance.phase = "layer";
  s.rebalance.layers_planned = 4;
  s.rebalance.layers_done = 1;
  s.rebalance.auto_known = false;
  Grid g = DrawExperts(s, ViewState{}, Rect{0, 0, 100, 30});
  EXPECT_THAT(g.Row(1), StartsWith("rebalance running: 1/4 layers committed   "));
  s.rebalance.phase = "failed";
  s.rebalance.error = "L2: out of memory";
  s.rebalance.rolled_back = true;
  s.rebalance.auto_last = "skipped: gain 0.01 < 0.05";
  g = DrawExperts(s, ViewState{}, Rect{0, 0, 100, 30});
  EXPECT_THAT(g.Row(1), StartsWith("rebalance FAILED at L2: out of memory (rolled back) (last: "
                                   "skipped: gain 0.01 < 0.05)"));
  EXPECT_EQ(g.at(0, 1).style, theme::kBad);
}

TEST(ConsoleDrawExperts, EveryLayoutFitsAndEmptyIsSaid) {
  EXPECT_THAT(DrawExperts(Snapshot{}, ViewState{}, Rect{0, 0, 80, 20}).Row(0),
              StartsWith("No expert load reported yet."));
  for (const Snapshot& s : {FixtureSnapshot(), EplbFixtureSnapshot(), Snapshot{}}) {
    for (int w : {0, 1, 12, 40, 80, 200}) {
      for (int h : {0, 1, 2, 3, 20, 60}) {
        for (int scroll : {0, 3, 100}) {
          ViewState v;
          v.experts_scroll = scroll;
          const Grid g = DrawExperts(s, v, Rect{0, 0, w, h});
          EXPECT_EQ(g.width(), w);
          EXPECT_EQ(g.height(), h);
          EXPECT_TRUE(RowsFit(g)) << w << "x" << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sy::console
