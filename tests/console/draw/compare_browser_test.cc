// The compare panel and the run browser, headless: fixed values in, exact
// text out; plus the pure Compare computation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/collect/compare.h"
#include "console/draw/browser.h"
#include "console/draw/compare.h"

namespace sy::console {
namespace {

telemetry::Envelope At(int64_t t) {
  telemetry::Envelope e;
  e.run = "r";
  e.t_us = t;
  return e;
}

// A window of 10 one-second steps: `decode` tokens each, and one kernel
// stats message per step with expert_ffn `moe_us` and attention 100 us.
WindowFigures Window(std::string label, int64_t from, int decode, int64_t moe_us, int64_t tpot,
                     const std::string& layout) {
  WindowAccumulator acc(std::move(label), from, from + 10'000'000);
  acc.SetInitialLayout(layout);
  for (int i = 0; i < 10; ++i) {
    const int64_t t = from + i * 1'000'000;
    telemetry::Step s;
    s.env = At(t);
    s.decode_tokens = decode;
    s.prefill_tokens = 50;
    s.batch_requests = 4;
    s.dur_us = 20'000;
    acc.Consume(s);
    telemetry::KernelStats ks;
    ks.env = At(t);
    ks.kernels = {{0, "expert_ffn", "compute", 2, moe_us, moe_us, 0, 0},
                  {0, "attention", "compute", 1, 100, 100, 0, 0},
                  {1, "dispatch", "comm", 1, 50, 50, 0, 0}};
    acc.Consume(ks);
    telemetry::RequestDone d;
    d.env = At(t);
    d.output_tokens = 5;
    d.ttft_us = 1000 + i;
    d.tpot_us = tpot;
    acc.Consume(d);
  }
  telemetry::Step outside;
  outside.env = At(from + 10'000'000);  // the window is half-open
  outside.decode_tokens = 1'000'000;
  acc.Consume(outside);
  return acc.Finish();
}

TEST(ConsoleCompare, FiguresAndDeltas) {
  const WindowFigures a = Window("before", 0, 100, 350, 100, "EP");
  const WindowFigures b = Window("after", 10'000'000, 120, 150, 82, "TP");
  EXPECT_EQ(a.steps, 10);
  EXPECT_DOUBLE_EQ(a.decode_tps, 100);
  EXPECT_DOUBLE_EQ(a.prefill_tps, 50);
  EXPECT_DOUBLE_EQ(a.moe_share, 0.8);  // (350 + 50) / 500
  EXPECT_DOUBLE_EQ(b.moe_share, 200.0 / 300);
  EXPECT_EQ(a.ttft.p50_us, 1004);
  EXPECT_EQ(a.kernels.front().name, "expert_ffn");
  EXPECT_EQ(a.kernels.front().mean_us, 175);
  EXPECT_TRUE(IsMoeKernel("dispatch"));
  EXPECT_TRUE(IsMoeKernel("fused_moe"));
  EXPECT_FALSE(IsMoeKernel("attention"));

  const Comparison c = Compare(a, b, 2);
  EXPECT_EQ(
      c.summary,
      "B vs A: decode tok/s +20%, TPOT -18%, TTFT +0%, MoE share 80% -> 67%, layout EP -> TP");
  ASSERT_EQ(c.figures.size(), 11u);
  EXPECT_EQ(c.figures[1].name, "decode tok/s");
  EXPECT_EQ(c.figures[1].delta, "+20%");
  EXPECT_EQ(c.figures[1].verdict, 1);
  EXPECT_EQ(c.figures[6].name, "TPOT p50");
  EXPECT_EQ(c.figures[6].verdict, 1);  // lower latency is better
  EXPECT_EQ(c.figures[9].delta, "-13.3 pts");
  EXPECT_EQ(c.figures[10].delta, "changed");
  ASSERT_EQ(c.kernels.size(), 2u);  // the union of both top 2, cut to 2
  EXPECT_EQ(c.kernels[0].name, "expert_ffn");
  EXPECT_EQ(c.kernels[1].name, "attention");
  EXPECT_EQ(PercentChange(0, 5), "");
}

TEST(ConsoleCompare, DrawsThePanel) {
  const Comparison c = Compare(Window("run-a 0.0s-10.0s", 0, 100, 350, 100, "EP"),
                               Window("run-a 10.0s-20.0s", 10'000'000, 120, 150, 82, "TP"), 3);
  const Grid g = DrawCompare(c, Rect{0, 0, 80, 24});
  EXPECT_EQ(g.ToString(),
            R"(┌─ Compare (Esc closes) ───────────────────────────────────────────────────────┐
│ A run-a 0.0s-10.0s                                                           │
│ B run-a 10.0s-20.0s                                                          │
│ B vs A: decode tok/s +20%, TPOT -18%, TTFT +0%, MoE share 80% -> 67%, layout │
│ figure                     A           B      change                         │
│ prefill tok/s           50/s        50/s         +0%                         │
│ decode tok/s           100/s       120/s        +20%                         │
│ batch (mean)               4           4         +0%                         │
│ step time            20.00ms     20.00ms         +0%                         │
│ TTFT p50              1.00ms      1.00ms         +0%                         │
│ TTFT p99              1.01ms      1.01ms         +0%                         │
│ TPOT p50               100us        82us        -18%                         │
│ TPOT p99               100us        82us        -18%                         │
│ requests done             10          10         +0%                         │
│ MoE share              80.0%       66.7%   -13.3 pts                         │
│ layout                    EP          TP     changed                         │
│                                                                              │
│ top kernels          A share     B share      change    A mean    B mean     │
│ expert_ffn             70.0%       50.0%   -20.0 pts     175us      75us     │
│ attention              20.0%       33.3%   +13.3 pts     100us     100us     │
│ dispatch               10.0%       16.7%    +6.7 pts      50us      50us     │
│                                                                              │
│                                                                              │
└──────────────────────────────────────────────────────────────────────────────┘)");
}

TEST(ConsoleCompare, DrawsAnythingAtAnySize) {
  const Comparison c = Compare(WindowFigures{}, WindowFigures{});
  for (int w : {0, 3, 20, 200}) {
    for (int h : {0, 2, 5, 60}) {
      const Grid g = DrawCompare(c, Rect{0, 0, w, h});
      EXPECT_EQ(g.width(), w);
      EXPECT_EQ(g.height(), h);
    }
  }
  EXPECT_THAT(DrawCompare(c, Rect{0, 0, 80, 24}).ToString(),
              ::testing::HasSubstr("(no kernel stats in either window)"));
}

BrowserState Runs() {
  BrowserState s;
  s.path = "/tmp/runs.db";
  s.file_bytes = 3 << 20;
  s.rows.push_back(BrowserRow{"run-20260102-b", "2026-01-02 10:11", "3m05s", "tiny-moe", 2, "EP>TP",
                              3, 1, 1850, 7400, "ended"});
  s.rows.push_back(BrowserRow{"run-20260101-a", "2026-01-01 09:00", "12.4s", "ling3-tiny", 4, "EP",
                              0, 0, 124, 0, "abnormal"});
  return s;
}

TEST(ConsoleBrowser, DrawsRunsAt80x8) {
  BrowserState s = Runs();
  s.selected = 1;
  EXPECT_EQ(DrawBrowser(s, 80, 8).ToString(),
            R"( Runs in /tmp/runs.db (3.00 MiB, 2 runs)                                        
 RUN                      DURATION MODEL        DEVS LAYOUTS    SW REBAL   SPANS
 run-20260102-b              3m05s tiny-moe        2 EP>TP       3     1    7.4k
 run-20260101-a              12.4s ling3-tiny      4 EP          0     0       0
                                                                                
                                                                                
                                                                                
Up/Down select  Enter replay  / filter  q quit                                  )");
}

TEST(ConsoleBrowser, WideShowsEveryColumnAndFilterLine) {
  BrowserState s = Runs();
  s.filter = "ling";
  s.filtering = true;
  EXPECT_EQ(
      DrawBrowser(s, 130, 5).ToString(),
      R"( Runs in /tmp/runs.db (3.00 MiB, 2 runs, 1 shown)                                                                                 
 RUN                                   STARTED          DURATION MODEL        DEVS LAYOUTS    SW REBAL   STEPS   SPANS END        
 run-20260101-a                        2026-01-01 09:00    12.4s ling3-tiny      4 EP          0     0     124       0 abnormal   
                                                                                                                                  
/ling_                                                                                                                            )");
  s.filter = "nothing";
  s.filtering = false;
  EXPECT_EQ(DrawBrowser(s, 60, 4).Row(2).substr(0, 28), " (no run matches the filter)");
  BrowserState empty;
  empty.path = "x.db";
  EXPECT_EQ(DrawBrowser(empty, 60, 4).Row(2).substr(0, 21), " (no runs stored yet)");
  EXPECT_EQ(DrawBrowser(empty, 0, 0).width(), 0);
}

}  // namespace
}  // namespace sy::console
