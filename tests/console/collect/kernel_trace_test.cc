// Kernel figures behind the Kernels view: window statistics over kept steps,
// exposed vs hidden communication per device, time by layer and kind; and
// the Collector keeping the last steps' spans and stats.
#include "console/collect/kernel_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/collect/collector.h"

namespace sy::console {
namespace {

using ::testing::ElementsAre;

telemetry::Span S(int device, int layer, const char* name, const char* kind, int64_t start,
                  int64_t dur) {
  telemetry::Span sp;
  sp.device = device;
  sp.layer = layer;
  sp.name = name;
  sp.kind = kind;
  sp.start_us = start;
  sp.dur_us = dur;
  return sp;
}

telemetry::KernelStat K(int device, const char* name, const char* kind, int count, int64_t total,
                        int64_t max) {
  telemetry::KernelStat k;
  k.device = device;
  k.name = name;
  k.kind = kind;
  k.count = count;
  k.total_us = total;
  k.max_us = max;
  return k;
}

TEST(ConsoleKernelTrace, CommHiddenUnderComputeIsNotExposed) {
  // Device 0: compute 0-100 and 150-300, comm 80-200 -> 20 + 50 hidden, 50
  // exposed (100-150). Device 1: comm alone, all exposed. Overlapping comm
  // spans count once.
  const std::vector<telemetry::Span> spans = {
      S(0, 0, "attn", "compute", 0, 100),  S(0, 0, "a2a", "comm", 80, 120),
      S(0, 1, "moe", "compute", 150, 150), S(1, 0, "a2a", "comm", 0, 40),
      S(1, 0, "a2a_b", "comm", 20, 40),    S(1, 1, "moe", "compute", 100, 50)};
  const std::vector<CommOverlap> o = CommOverlapPerDevice(spans);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].device, 0);
  EXPECT_EQ(o[0].compute_us, 250);
  EXPECT_EQ(o[0].comm_us, 120);
  EXPECT_EQ(o[0].hidden_us, 70);
  EXPECT_EQ(o[0].exposed_us, 50);
  EXPECT_EQ(o[0].busy_us, 300);
  EXPECT_EQ(o[1].comm_us, 60);
  EXPECT_EQ(o[1].hidden_us, 0);
  EXPECT_EQ(o[1].exposed_us, 60);
  EXPECT_EQ(o[1].busy_us, 110);
  const CommOverlap t = CommOverlapTotal(o);
  EXPECT_EQ(t.device, -1);
  EXPECT_EQ(t.comm_us, 180);
  EXPECT_EQ(t.exposed_us, 110);
  EXPECT_EQ(t.hidden_us, 70);
  EXPECT_TRUE(CommOverlapPerDevice({}).empty());
}

TEST(ConsoleKernelTrace, LayerBreakdownSplitsComputeAndComm) {
  const std::vector<telemetry::Span> spans = {
      S(0, 0, "attn", "compute", 0, 100), S(0, 0, "a2a", "comm", 80, 120),
      S(0, 1, "moe", "compute", 150, 150), S(0, 1, "norm", "compute", 300, 10),
      S(0, -1, "lm_head", "compute", 310, 30)};
  const std::vector<LayerKindRow> rows = LayerKindBreakdown(spans);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].layer, 0);
  EXPECT_EQ(rows[0].compute_us, 100);
  EXPECT_EQ(rows[0].comm_us, 120);
  EXPECT_EQ(rows[0].exposed_us, 50);  // 80-100 and 150-200 are under compute
  EXPECT_EQ(rows[0].top, "attn");
  EXPECT_EQ(rows[1].layer, 1);
  EXPECT_EQ(rows[1].compute_us, 160);
  EXPECT_EQ(rows[1].top, "moe");
  EXPECT_EQ(rows[1].kernels, 2);
  EXPECT_EQ(rows[2].layer, -1);  // outside the stack, last
  EXPECT_EQ(rows[2].top, "lm_head");
}

TEST(ConsoleKernelTrace, WindowRowsGiveMeanAndPercentilesPerStep) {
  // Two devices; moe takes 100, 200, 300, 400 us per device in four steps,
  // a2a runs only in the last one.
  std::deque<telemetry::KernelStats> steps;
  for (int i = 0; i < 4; ++i) {
    telemetry::KernelStats ks;
    ks.step = 10 + i;
    ks.kernels = {K(0, "moe", "compute", 2, 100 * (i + 1), 60 * (i + 1)),
                  K(1, "moe", "compute", 2, 100 * (i + 1), 50 * (i + 1))};
    if (i == 3) ks.kernels.push_back(K(0, "a2a", "comm", 1, 200, 200));
    steps.push_back(ks);
  }
  const std::vector<KernelRow> rows = KernelWindowRows(steps);
  ASSERT_EQ(rows.size(), 2u);
  const KernelRow& moe = rows[0];
  EXPECT_EQ(moe.name, "moe");
  EXPECT_EQ(moe.count, 16);
  EXPECT_EQ(moe.total_us, 2000);
  EXPECT_EQ(moe.mean_us, 125);
  EXPECT_EQ(moe.max_us, 240);
  EXPECT_DOUBLE_EQ(moe.share, 2000.0 / 2200.0);
  EXPECT_EQ(moe.steps, 4);
  EXPECT_EQ(moe.step_mean_us, 250);
  EXPECT_EQ(moe.step_p50_us, 200);
  EXPECT_EQ(moe.step_p99_us, 400);
  const KernelRow& a2a = rows[1];
  EXPECT_EQ(a2a.kind, "comm");
  // 200 us on one of the two devices in one step of four: 100 per device
  // there, 0 in the others.
  EXPECT_EQ(a2a.step_mean_us, 25);
  EXPECT_EQ(a2a.step_p50_us, 0);
  EXPECT_EQ(a2a.step_p99_us, 100);
  EXPECT_TRUE(KernelWindowRows({}).empty());
}

TEST(ConsoleKernelTrace, CollectorKeepsTheLastStepsSpansAndStats) {
  CollectorOptions o;
  o.span_steps_kept = 3;
  o.kernel_steps_kept = 2;
  Collector c(o);
  for (int step = 1; step <= 5; ++step) {
    telemetry::Spans sp;
    sp.env.run = "r";
    sp.step = step;
    sp.spans = {S(0, 0, "attn", "compute", 0, 10 * step)};
    c.Consume(sp);
    telemetry::KernelStats ks;
    ks.env.run = "r";
    ks.step = step;
    ks.kernels = {K(0, "attn", "compute", 1, 10 * step, 10 * step)};
    c.Consume(ks);
  }
  const Snapshot s = c.TakeSnapshot();
  std::vector<int64_t> kept;
  for (const auto& p : s.span_steps) kept.push_back(p->step);
  EXPECT_THAT(kept, ElementsAre(3, 4, 5));
  EXPECT_EQ(s.span_steps.back()->spans[0].dur_us, 50);
  EXPECT_EQ(s.spans_step, 5);
  ASSERT_EQ(s.top_kernels.size(), 1u);
  EXPECT_EQ(s.top_kernels[0].steps, 2);  // steps 4 and 5
  EXPECT_EQ(s.top_kernels[0].total_us, 90);
  EXPECT_EQ(s.top_kernels[0].step_p99_us, 50);
  // A copy shares the kept steps instead of copying their spans.
  const Snapshot again = c.TakeSnapshot();
  EXPECT_EQ(again.span_steps[0].get(), s.span_steps[0].get());
  c.Reset();
  EXPECT_TRUE(c.TakeSnapshot().span_steps.empty());
  EXPECT_TRUE(c.TakeSnapshot().top_kernels.empty());
}

TEST(ConsoleKernelTrace, CollectorTagsLogLinesWithTheEventKind) {
  Collector c;
  telemetry::Event e;
  e.env.run = "r";
  e.kind = "rebalance";
  e.phase = "failed";
  e.message = "out of memory";
  c.Consume(e);
  e.kind = "lifecycle";
  e.name = "start";
  e.phase = "";
  c.Consume(e);
  c.AddLog(LogLevel::kCommand, "> :pause");
  const Snapshot s = c.TakeSnapshot();
  ASSERT_GE(s.log.size(), 3u);
  EXPECT_EQ(s.log.front().kind, "rebalance");
  EXPECT_EQ(s.log[s.log.size() - 2].kind, "lifecycle");
  EXPECT_EQ(s.log.back().kind, "");
}

}  // namespace
}  // namespace sy::console
