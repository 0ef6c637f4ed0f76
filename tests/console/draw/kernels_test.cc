// Headless tests of the Kernels view: the selected step among the kept
// ones, zoomed lanes, exposed communication beside compute, and the three
// tables ('g').
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::FixtureSnapshot;
using ::sy::console::testing::Repeat;
using ::sy::console::testing::RowsFit;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The fixture keeping three steps: 1232 and 1233 are the fixture's step
// with every span 2x / 1.5x as long (comm hidden under compute in 1232).
Snapshot ThreeSteps() {
  Snapshot s = FixtureSnapshot();
  auto scaled = [&](int64_t step, double k) {
    auto st = std::make_shared<StepSpans>();
    st->step = step;
    st->spans = s.spans;
    for (auto& sp : st->spans) {
      sp.start_us = static_cast<int64_t>(sp.start_us * k);
      sp.dur_us = static_cast<int64_t>(sp.dur_us * k);
    }
    return st;
  };
  auto hidden = scaled(1232, 2);
  hidden->spans[1].start_us = 0;  // device 0's comm now under its attn
  s.span_steps = {hidden, scaled(1233, 1.5), scaled(1234, 1)};
  return s;
}

// Width 75: lanes of 50 cells, then the 18-column exposed figure.
constexpr int kW = 75;

TEST(ConsoleDrawKernelsView, NewestStepWithExposedCommBesideEachLane) {
  const Grid g = DrawKernels(ThreeSteps(), ViewState{}, Rect{0, 0, kW, 20});
  EXPECT_THAT(g.Row(0),
              StartsWith("Step 1234 (newest of 3 kept), 1.00ms  █ compute ≈ comm ▓ both"));
  // 20 cells attn, 10 comm, 20 moe_ffn; the comm is not under compute:
  // all of it exposed on both devices.
  EXPECT_EQ(g.Row(1),
            "dev0 │" + Repeat("█", 20) + Repeat("≈", 10) + Repeat("█", 20) + "│ exp  200us 100.0%");
  EXPECT_EQ(g.Row(2),
            "dev1 │" + Repeat("·", 20) + Repeat("≈", 10) + Repeat("█", 20) + "│ exp  200us 100.0%");
  EXPECT_EQ(g.at(kW - 3, 1).style, theme::kWarn);
  EXPECT_THAT(g.Row(3), StartsWith("sum: compute 1.20ms  comm 400us  hidden 0us  exposed 400us "
                                   "(100.0%)"));
  EXPECT_THAT(g.Row(5), StartsWith("Top kernels, 1 step to 1234; mean/p50/p99: time per step per "
                                   "device"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawKernelsView, StepBackPinsAStepThatStaysAsNewStepsArrive) {
  Snapshot s = ThreeSteps();
  ViewState v;
  v.kernel_nav = -2;  // ',' twice
  EXPECT_EQ(SelectedKernelStep(s, v), 1232);
  Grid g = DrawKernels(s, v, Rect{0, 0, kW, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Step 1232 (1 of 3 kept), 2.00ms"));
  // Device 0's comm runs under its attn: hidden, nothing exposed.
  EXPECT_THAT(g.Row(1), EndsWith("│ exp    0us   0.0%"));
  EXPECT_EQ(g.at(kW - 3, 1).style, theme::kGood);
  ResolveKernelStep(s, v);
  EXPECT_EQ(v.kernel_step, 1232);
  EXPECT_EQ(v.kernel_nav, 0);
  v.kernel_nav = 1;  // '.'
  ResolveKernelStep(s, v);
  EXPECT_EQ(v.kernel_step, 1233);
  // A new step arrives and the oldest falls off: 1233 stays selected.
  s.span_steps.erase(s.span_steps.begin());
  auto next = std::make_shared<StepSpans>(*s.span_steps.back());
  next->step = 1235;
  s.span_steps.push_back(next);
  g = DrawKernels(s, v, Rect{0, 0, kW, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Step 1233 (1 of 3 kept), 1.50ms"));
  // Past the newest: follow again.
  v.kernel_nav = 5;
  ResolveKernelStep(s, v);
  EXPECT_EQ(v.kernel_step, -1);
  EXPECT_EQ(SelectedKernelStep(s, v), 1235);
}

TEST(ConsoleDrawKernelsView, PinnedStepNoLongerKeptSaysSo) {
  Snapshot s = ThreeSteps();
  ViewState v;
  v.kernel_step = 1000;
  EXPECT_EQ(SelectedKernelStep(s, v), -1);
  const Grid g = DrawKernels(s, v, Rect{0, 0, 100, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Step 1000 is no longer kept (kept 1232..1234): ',' '.' pick "
                                   "one, f follows the newest."));
  v.kernel_nav = 1;  // '.' from a step that fell off: the oldest kept after it
  EXPECT_EQ(SelectedKernelStep(s, v), 1233);
}

TEST(ConsoleDrawKernelsView, ZoomShowsAWindowOfTheStep) {
  ViewState v;
  v.kernel_zoom = 1;
  v.kernel_pan = 1;  // the middle half: 250-750 us
  const Grid g = DrawKernels(ThreeSteps(), v, Rect{0, 0, kW, 20});
  EXPECT_THAT(g.Row(0), StartsWith("Step 1234 (newest of 3 kept), 1.00ms, zoom x2 250us-750us"));
  // 500 us over 50 cells: 15 attn, 20 comm, 15 moe_ffn.
  EXPECT_EQ(g.Row(1),
            "dev0 │" + Repeat("█", 15) + Repeat("≈", 20) + Repeat("█", 15) + "│ exp  200us 100.0%");
  v.kernel_pan = 99;  // clamped: the last window, 500-1000 us
  const Grid end = DrawKernels(ThreeSteps(), v, Rect{0, 0, kW, 20});
  EXPECT_THAT(end.Row(0), HasSubstr("zoom x2 500us-1.00ms"));
  EXPECT_EQ(end.Row(1), "dev0 │" + Repeat("≈", 10) + Repeat("█", 40) + "│ exp  200us 100.0%");
}

TEST(ConsoleDrawKernelsView, TopTableShowsPerStepMeanP50P99) {
  const Grid g = DrawKernels(ThreeSteps(), ViewState{}, Rect{0, 0, 80, 20});
  // The name column is the longest name (all_to_all) + 2 = 12, not the
  // 80 - 58 = 22 the seven figure columns leave.
  EXPECT_EQ(g.Row(6), PadRight(PadRight("kernel", 12) +
                                   "    kind  share  calls per call     mean      p50      p99",
                               80));
  EXPECT_EQ(g.Row(7), PadRight(PadRight("moe_ffn", 12) +
                                   " compute  50.0%      8    100us    400us    400us    400us",
                               80));
  EXPECT_EQ(g.Row(9), PadRight(PadRight("all_to_all", 12) +
                                   "    comm  25.0%      4    100us    200us    200us    200us",
                               80));
  EXPECT_EQ(g.at(16, 9).style, theme::kComm);
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawKernelsView, TableFiguresStayNextToNamesOnAWideTerminal) {
  const Grid wide = DrawKernels(ThreeSteps(), ViewState{}, Rect{0, 0, 200, 20});
  EXPECT_EQ(wide.Row(7), PadRight(PadRight("moe_ffn", 12) +
                                      " compute  50.0%      8    100us    400us    400us    400us",
                                  200));
  // A name longer than the slack is cut at it: the figures keep their columns.
  Snapshot s = ThreeSteps();
  s.top_kernels.front().name = std::string(40, 'k');
  const Grid narrow = DrawKernels(s, ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_EQ(narrow.Row(6),
            PadRight("kernel", 22) + "    kind  share  calls per call     mean      p50      p99");
  EXPECT_TRUE(RowsFit(narrow));
}

TEST(ConsoleDrawKernelsView, LayerTableSplitsComputeAndExposedComm) {
  Snapshot s = ThreeSteps();
  auto step = std::make_shared<StepSpans>(*s.span_steps.back());
  step->spans[2].layer = 1;  // moe_ffn on device 0 in layer 1
  step->spans.push_back(step->spans[0]);
  step->spans.back().layer = -1;
  step->spans.back().name = "lm_head";
  step->spans.back().dur_us = 50;
  s.span_steps.back() = step;
  ViewState v;
  v.kernel_table = KernelTable::kLayer;
  const Grid g = DrawKernels(s, v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(5), StartsWith("Step 1234 by layer, summed over devices: compute | comm"));
  EXPECT_EQ(g.Row(6),
            PadRight("layer     compute      comm   exposed   share top compute kernel", 80));
  // Layer 0: attn 400 + moe_ffn 400 (device 1), both all_to_all (400, all
  // exposed); layer 1: moe_ffn 400 on device 0; then lm_head outside.
  EXPECT_EQ(g.Row(7), PadRight("L0          800us     400us     400us   72.7% attn", 80));
  EXPECT_EQ(g.Row(8), PadRight("L1          400us       0us       0us   24.2% moe_ffn", 80));
  EXPECT_EQ(g.Row(9), PadRight("other        50us       0us       0us    3.0% lm_head", 80));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawKernelsView, KindTableGroupsKernelsUnderComputeAndComm) {
  ViewState v;
  v.kernel_table = KernelTable::kKind;
  const Grid g = DrawKernels(ThreeSteps(), v, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(5), StartsWith("Step 1234 by kind, summed over devices"));
  // The name column: the longest head, "comm (exposed ...)" (32), + 2.
  auto row = [](const std::string& name, const std::string& figures) {
    return PadRight(PadRight(name, 34) + figures, 80);
  };
  EXPECT_EQ(g.Row(6), row("kind / kernel", "  calls      time   share"));
  EXPECT_EQ(g.Row(7), row("compute", "      3    1.20ms   75.0%"));
  EXPECT_EQ(g.Row(8), row("  moe_ffn", "      2     800us   50.0%"));
  EXPECT_EQ(g.Row(9), row("  attn", "      1     400us   25.0%"));
  EXPECT_EQ(g.Row(10), row("comm (exposed 400us, hidden 0us)", "      2     400us   25.0%"));
  EXPECT_EQ(g.Row(11), row("  all_to_all", "      2     400us   25.0%"));
  EXPECT_EQ(g.at(2, 11).style, theme::kComm);
}

TEST(ConsoleDrawKernelsView, EveryTableFitsSmallAndLargeSizes) {
  for (KernelTable t : {KernelTable::kTop, KernelTable::kLayer, KernelTable::kKind}) {
    ViewState v;
    v.kernel_table = t;
    v.kernel_zoom = 3;
    v.kernel_pan = 5;
    for (auto [w, h] : {std::pair{80, 20}, std::pair{200, 56}, std::pair{40, 4}, std::pair{0, 0}}) {
      const Grid g = DrawKernels(ThreeSteps(), v, Rect{0, 0, w, h});
      EXPECT_EQ(g.width(), w);
      EXPECT_EQ(g.height(), h);
      EXPECT_TRUE(RowsFit(g));
    }
    const Grid empty = DrawKernels(Snapshot{}, v, Rect{0, 0, 100, 10});
    EXPECT_THAT(empty.Row(0), StartsWith("No spans for the latest step"));
  }
}

}  // namespace
}  // namespace sy::console
