// Headless panel tests: a fixed Snapshot in, exact text out.
#include "console/draw/views.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "console/draw/format.h"
#include "console/input/command_line.h"
#include "console/input/keymap.h"
#include "tests/console/draw/fixture.h"

namespace sy::console {
namespace {

using ::sy::console::testing::CacheFixtureSnapshot;
using ::sy::console::testing::FixtureSnapshot;
using ::sy::console::testing::HybridFixtureSnapshot;
using ::sy::console::testing::Repeat;
using ::sy::console::testing::RowsFit;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string Text(const Grid& g) { return g.ToString(); }

TEST(ConsoleDrawOverview, ShowsRatesLatencyAndRun) {
  const Grid g = DrawOverview(FixtureSnapshot(), ViewState{}, Rect{0, 2, 80, 20});
  ASSERT_EQ(g.width(), 80);
  ASSERT_EQ(g.height(), 20);
  EXPECT_EQ(g.Row(0).substr(0, 38), "Throughput, last 60s (engine time)    ");
  EXPECT_THAT(g.Row(1), StartsWith("prefill    12.3k/s "));
  EXPECT_THAT(g.Row(3), StartsWith("decode       850/s "));
  EXPECT_THAT(g.Row(5), StartsWith("batch            7 "));
  EXPECT_THAT(g.Row(6), StartsWith("running          8 "));
  EXPECT_THAT(g.Row(7), StartsWith("waiting          2 "));
  EXPECT_THAT(g.Row(9), StartsWith("Latency, last 200 requests"));
  EXPECT_THAT(g.Row(10), StartsWith("TTFT     p50   12.34ms   p99   45.67ms"));
  EXPECT_THAT(g.Row(11), StartsWith("TPOT     p50     850us   p99    2.10ms"));
  EXPECT_THAT(g.Row(12), StartsWith("finished 1.5k   generated 45.6k   step 1234"));
  EXPECT_THAT(g.Row(14),
              StartsWith("Model    tiny-moe  12.3M params  4 layers  8 experts top-2  fp32"));
  EXPECT_THAT(g.Row(15), StartsWith("Layout   EP on 2 devices  KV 512 pages/device x 16 tokens"));
  EXPECT_THAT(g.Row(16), StartsWith("Workload poisson 20 req/s"));
  // Charts: braille for token rates, blocks for the queue.
  EXPECT_THAT(g.Row(2), HasSubstr("⣿"));
  EXPECT_THAT(g.Row(7), HasSubstr("▄"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawOverview, BeforeMetaSaysWaiting) {
  Snapshot s;
  const Grid g = DrawOverview(s, ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_THAT(Text(g), HasSubstr("waiting for the engine's meta message"));
  EXPECT_THAT(g.Row(10), StartsWith("TTFT     p50         -   p99         -"));
}

TEST(ConsoleDrawKernels, LanesPerDeviceWithCommDistinct) {
  const Grid g = DrawKernels(FixtureSnapshot(), ViewState{}, Rect{0, 0, 75, 20});
  EXPECT_THAT(g.Row(0),
              StartsWith("Step 1234 (newest of 1 kept), 1.00ms  █ compute ≈ comm ▓ both"));
  // 50-column lanes over 1000 us: 20 cols attn, 10 cols comm, 20 cols moe_ffn.
  EXPECT_EQ(g.Row(1), "dev0 │" + std::string() + "████████████████████" + "≈≈≈≈≈≈≈≈≈≈" +
                          "████████████████████" + "│ exp  200us 100.0%");
  EXPECT_EQ(g.Row(2), "dev1 │" + std::string() + "····················" + "≈≈≈≈≈≈≈≈≈≈" +
                          "████████████████████" + "│ exp  200us 100.0%");
  EXPECT_EQ(g.at(6 + 20, 1).style.fg, Color::kMagenta);  // comm is magenta
  EXPECT_NE(g.at(6, 1).style.fg, Color::kMagenta);
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawKernels, TopKernelsTable) {
  const Grid g = DrawKernels(FixtureSnapshot(), ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(5), StartsWith("Top kernels, 1 step to 1234; mean/p50/p99: time per step per "
                                   "device"));
  // name column = the longest name (all_to_all) + 2 = 12 wide.
  EXPECT_EQ(g.Row(6), PadRight(std::string("kernel") + std::string(6, ' ') +
                                   "    kind  share  calls per call     mean      p50      p99",
                               80));
  EXPECT_EQ(g.Row(7), PadRight(std::string("moe_ffn") + std::string(5, ' ') +
                                   " compute  50.0%      8    100us    400us    400us    400us",
                               80));
  EXPECT_EQ(g.Row(9), PadRight(std::string("all_to_all") + std::string(2, ' ') +
                                   "    comm  25.0%      4    100us    200us    200us    200us",
                               80));
}

TEST(ConsoleDrawKernels, EmptyStatesExplainTheTraceLevel) {
  Snapshot s;
  const Grid g = DrawKernels(s, ViewState{}, Rect{0, 0, 100, 10});
  EXPECT_THAT(g.Row(0),
              StartsWith("No spans for the latest step: per-kernel timelines need ':trace full'."));
  EXPECT_THAT(g.Row(2),
              StartsWith("No kernel stats yet (trace level 'off'? try ':trace summary')."));
  EXPECT_EQ(SelectedKernelStep(s, ViewState{}), -1);
}

TEST(ConsoleDrawKernels, MoreDevicesThanRowsAreSummarised) {
  Snapshot s = FixtureSnapshot();
  for (int d = 2; d < 16; ++d) {
    telemetry::Span sp;
    sp.device = d;
    sp.kind = "compute";
    sp.name = "attn";
    sp.dur_us = 10;
    s.spans.push_back(sp);
  }
  const Grid g = DrawKernels(s, ViewState{}, Rect{0, 0, 80, 12});
  EXPECT_THAT(Text(g), HasSubstr("… 12 more devices"));  // 4 lanes fit
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawOverview, HybridModelShowsItsLayerMixAndStateSlots) {
  const Grid g = DrawOverview(HybridFixtureSnapshot(), ViewState{}, Rect{0, 2, 100, 20});
  EXPECT_THAT(g.Row(14), StartsWith("Model    tiny-hybrid  12.3M params  4 layers (1 mla + 3 kda)  "
                                    "8 experts top-2  fp32"));
  EXPECT_THAT(g.Row(15), StartsWith("Layout   EP on 2 devices  KV 200 pages/device x 16 tokens  "
                                    "state 8 slots/device"));
}

TEST(ConsoleDrawMemory, BarsPerDeviceAndTotal) {
  const Grid g = DrawMemory(FixtureSnapshot(), ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_EQ(g.Row(0).substr(0, 58), "KV cache pages per device (1 page = 16 tokens, 128 KiB)   ");
  // bar 22 wide: 20 inside; 25% -> 5 full.
  EXPECT_EQ(g.Row(1), "dev0  KV    [" + Repeat("█", 5) + Repeat("░", 15) +
                          "]    128/512  25.0%   16.0 MiB/64.0 MiB  run 5 ");
  EXPECT_THAT(g.Row(2), StartsWith("dev1  KV    ["));
  EXPECT_THAT(g.Row(2), HasSubstr("480/512  93.8%   60.0 MiB/64.0 MiB  run 3"));
  EXPECT_EQ(g.at(13, 2).style.fg, Color::kRed);  // > 90% full
  EXPECT_EQ(g.at(13, 1).style.fg, Color::kGreen);
  EXPECT_THAT(g.Row(4), StartsWith("total KV    608/1024 pages  59.4%  76.0 MiB/128 MiB  "));
  EXPECT_THAT(g.Row(5), StartsWith("running 8  waiting 2  "));
  // No linear layers: no slot rows, no slot totals, nothing about state.
  EXPECT_THAT(Text(g), Not(HasSubstr("slot")));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawMemory, HybridShowsKvPagesAndStateSlotsPerDevice) {
  const Grid g = DrawMemory(HybridFixtureSnapshot(), ViewState{}, Rect{0, 0, 100, 20});
  EXPECT_THAT(g.Row(0), StartsWith("KV cache pages per device (1 page = 16 tokens, 20.0 KiB); "
                                   "state slots (1 per request, 438 KiB)"));
  // bar 42 wide: 40 inside. dev0: 40/200 pages = 20% -> 8 full; 3/8 slots -> 15 full.
  EXPECT_THAT(g.Row(1), StartsWith("dev0  KV    [" + Repeat("█", 8) + Repeat("░", 32) +
                                   "]     40/200  20.0%    800 KiB/3.91 MiB  run 3 "));
  EXPECT_THAT(g.Row(2), StartsWith("      slots [" + Repeat("█", 15) + Repeat("░", 25) +
                                   "]        3/8  37.5%   1.28 MiB/3.42 MiB   "));
  EXPECT_THAT(g.Row(3), StartsWith("dev1  KV    ["));
  EXPECT_THAT(g.Row(3), HasSubstr("]    130/200  65.0%   2.54 MiB/3.91 MiB  run 8"));
  EXPECT_THAT(g.Row(4), HasSubstr("]        8/8 100.0%   3.42 MiB/3.42 MiB"));
  EXPECT_EQ(g.at(13, 4).style.fg, Color::kRed);    // every slot taken
  EXPECT_EQ(g.at(13, 3).style.fg, Color::kGreen);  // pages at 65%
  EXPECT_EQ(g.at(52, 4).style.fg, Color::kRed);    // the bar is full to its end
  EXPECT_THAT(g.Row(6), StartsWith("total KV    170/400 pages  42.5%  3.32 MiB/7.81 MiB  "));
  EXPECT_THAT(g.Row(7), StartsWith("total slots 11/16 slots  68.8%  4.71 MiB/6.84 MiB  "));
  EXPECT_THAT(g.Row(8), StartsWith("running 11  waiting 4  "));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawMemory, ManyHybridDevicesAreCutWithACount) {
  Snapshot s = HybridFixtureSnapshot();
  for (int d = 2; d < 12; ++d) {
    telemetry::DeviceOccupancy dev = s.kv[0];
    dev.device = d;
    s.kv.push_back(dev);
  }
  // 12 rows: title, 3 devices x 2 rows, "more", blank, 3 total lines.
  const Grid g = DrawMemory(s, ViewState{}, Rect{0, 0, 80, 12});
  EXPECT_THAT(g.Row(5), StartsWith("dev2  KV    ["));
  EXPECT_THAT(g.Row(6), StartsWith("      slots ["));
  EXPECT_THAT(g.Row(7), StartsWith("… 9 more devices"));
  // Totals still cover every device.
  EXPECT_THAT(g.Row(9), StartsWith("total KV    570/2400 pages"));
  EXPECT_THAT(g.Row(10), StartsWith("total slots 41/96 slots"));
  EXPECT_THAT(g.Row(11), StartsWith("running 11  waiting 4"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawMemory, RunsRecordedWithoutBytesShowNoByteColumn) {
  Snapshot s = FixtureSnapshot();
  for (auto& d : s.kv) d.kv_bytes_used = d.kv_bytes_total = 0;
  const Grid g = DrawMemory(s, ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(0), StartsWith("KV cache pages per device (1 page = 16 tokens)  "));
  EXPECT_THAT(g.Row(1), HasSubstr("128/512  25.0%" + std::string(22, ' ') + "run 5"));
  EXPECT_THAT(g.Row(4), StartsWith("total KV    608/1024 pages  59.4%   "));
  EXPECT_THAT(Text(g), Not(HasSubstr(" B/")));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawMemory, PrefixCacheRowPerDeviceAndTotal) {
  const Grid g = DrawMemory(CacheFixtureSnapshot(), ViewState{}, Rect{0, 0, 80, 20});
  EXPECT_THAT(g.Row(1), StartsWith("dev0  KV    ["));
  EXPECT_EQ(g.Row(2),
            PadRight("      cache hit 42.0%  1.5k tokens  34 nodes  evicted 120 pages", 80));
  EXPECT_THAT(g.Row(3), StartsWith("dev1  KV    ["));
  EXPECT_THAT(g.Row(4), StartsWith("      cache hit 0.0%  96 tokens  5 nodes  evicted 0 pages  "));
  EXPECT_THAT(g.Row(6), StartsWith("total KV    608/1024 pages"));
  EXPECT_THAT(g.Row(7), StartsWith("total cache 1.6k tokens  39 nodes  evicted 120 pages  "));
  EXPECT_THAT(g.Row(8), StartsWith("running 8  waiting 2  "));
  // Without linear layers there are no checkpoint slots to mention.
  EXPECT_THAT(Text(g), Not(HasSubstr("slot")));
  EXPECT_TRUE(RowsFit(g));

  // Hybrid: the tree's checkpoint slots show beside its tokens.
  Snapshot h = HybridFixtureSnapshot();
  h.kv[0].cache_tokens = 640;
  h.kv[0].cache_nodes = 12;
  h.kv[0].cache_slots = 2;
  h.kv[0].cache_hit_rate = 0.5;
  const Grid hg = DrawMemory(h, ViewState{}, Rect{0, 0, 100, 20});
  EXPECT_THAT(hg.Row(2), StartsWith("      slots ["));
  EXPECT_THAT(hg.Row(3),
              StartsWith("      cache hit 50.0%  640 tokens  12 nodes  2 slots  evicted 0 pages"));
  EXPECT_THAT(hg.Row(6), StartsWith("      cache hit 0.0%  0 tokens  0 nodes  0 slots"));
  EXPECT_THAT(hg.Row(10), StartsWith("total cache 640 tokens  12 nodes  2 slots  evicted 0 pages"));
  EXPECT_TRUE(RowsFit(hg));
}

TEST(ConsoleDrawMemory, TinyAndEmptySizesDoNotCrash) {
  for (const Snapshot& s :
       {FixtureSnapshot(), HybridFixtureSnapshot(), CacheFixtureSnapshot(), Snapshot{}}) {
    for (int w : {0, 1, 5, 30}) {
      for (int h : {0, 1, 3, 6}) {
        const Grid g = DrawMemory(s, ViewState{}, Rect{0, 0, w, h});
        EXPECT_EQ(g.width(), w);
        EXPECT_EQ(g.height(), h);
      }
    }
  }
}

TEST(ConsoleDrawLog, NewestAtBottomAndScrolls) {
  const Snapshot s = FixtureSnapshot();
  Grid g = DrawLog(s, ViewState{}, Rect{0, 0, 70, 6});
  EXPECT_THAT(g.Row(0), StartsWith("Log: 4 lines"));
  EXPECT_EQ(g.Row(1), std::string(70, ' '));
  EXPECT_THAT(g.Row(2), StartsWith("     1.5s lifecycle start: serving tiny-moe"));
  EXPECT_THAT(g.Row(3), StartsWith("  console > :pause"));
  EXPECT_THAT(g.Row(5), StartsWith("  console < :trace loud failed: INVALID_ARGUMENT: bad level"));
  EXPECT_EQ(g.at(10, 5).style.fg, Color::kRed);

  ViewState v;
  v.log_scroll = 2;
  g = DrawLog(s, v, Rect{0, 0, 70, 3});
  EXPECT_THAT(g.Row(0), StartsWith("Log: 4 lines, scrolled up 2"));
  EXPECT_THAT(g.Row(1), StartsWith("     1.5s lifecycle start"));
  EXPECT_THAT(g.Row(2), StartsWith("  console > :pause"));
  v.log_scroll = 99;  // clamped to the oldest page
  g = DrawLog(s, v, Rect{0, 0, 70, 3});
  EXPECT_THAT(g.Row(1), StartsWith("     1.5s lifecycle start"));
}

TEST(ConsoleDrawLog, LongLinesAreCutNotWrapped) {
  Snapshot s;
  s.log = {{-1, LogLevel::kInfo, std::string(200, 'x')}};
  const Grid g = DrawLog(s, ViewState{}, Rect{0, 0, 40, 3});
  EXPECT_EQ(g.Row(2), "  console " + std::string(29, 'x') + "…");
  EXPECT_EQ(g.Row(1), std::string(40, ' '));
}

TEST(ConsoleDrawHeader, RunModelDevicesLayoutStateTrace) {
  Snapshot s = FixtureSnapshot();
  Grid g = DrawHeader(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0),
              StartsWith(" switchyard  RUNNING  tiny-moe  2 dev EP  trace full  run run-42"));
  s.paused = true;
  s.engine_state = "paused";
  g = DrawHeader(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0), HasSubstr("  PAUSED  "));
  s.conn = ConnState::kLost;
  g = DrawHeader(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0), StartsWith(" switchyard  LOST  tiny-moe"));
  s.conn = ConnState::kEnded;  // its lifecycle "stop" arrived
  s.run_stopped = true;
  g = DrawHeader(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0), StartsWith(" switchyard  STOPPED  tiny-moe"));
  s.run_stopped = false;
  s.conn = ConnState::kReplay;
  s.replay = ReplayClock{12.34, 60, 2, true};
  g = DrawHeader(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0), StartsWith(" switchyard  REPLAY 12.3s/60.0s x2 PLAYING  engine PAUSED"));
  s.replay = ReplayClock{0, 60, 0.25, false};
  g = DrawHeader(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0), HasSubstr("REPLAY 0.0s/60.0s x0.25 PAUSED"));
}

TEST(ConsoleDrawStatus, ConnectionCountersAndStore) {
  Snapshot s = FixtureSnapshot();
  Grid g = DrawStatus(s, ViewState{}, 100);
  EXPECT_THAT(g.Row(0), StartsWith(" ● live   msgs 12.3k  gaps 0  store drops 0  db /tmp/runs.db"));
  s.conn = ConnState::kLost;
  s.heartbeat_age_s = 3.25;
  s.gaps = 5;
  s.store_error = "RESOURCE_EXHAUSTED: disk full";
  g = DrawStatus(s, ViewState{}, 120);
  EXPECT_THAT(g.Row(0), StartsWith(" ● lost (3.2s since heartbeat)   msgs 12.3k  gaps 5  store "
                                   "ERROR RESOURCE_EXHAUSTED: disk full  db /tmp/runs.db"));
  s.conn = ConnState::kEnded;
  g = DrawStatus(s, ViewState{}, 120);
  EXPECT_THAT(g.Row(0), StartsWith(" ● ended (the engine stopped the run)   msgs 12.3k"));
  s.conn = ConnState::kReplay;
  g = DrawStatus(s, ViewState{}, 80);
  EXPECT_THAT(g.Row(0), HasSubstr("replay /tmp/runs.db"));
}

TEST(ConsoleDrawHelp, ListsEveryKeyAndCommandAt80x24) {
  ViewState v;
  v.replay = true;
  v.help = true;
  const Grid g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  const std::string text = Text(g);
  EXPECT_LE(HelpHeight(v, 80, 23), 23);  // fits above the status line
  // The view keys share one row; pairs of keys with one help text share an
  // entry ("Up/Down"); every other key has its own. At 80x24 the compact
  // layout: keys flow along the rows, commands by usage.
  EXPECT_THAT(text, HasSubstr("1-6      views: Overview, Kernels, Memory, Experts, Log, Requests"));
  EXPECT_THAT(text, HasSubstr("Up/Down scroll Log/Experts"));
  EXPECT_THAT(text, HasSubstr("PageUp/PageDown page up / down"));
  EXPECT_THAT(text, HasSubstr("[/] Experts: slot map layer"));
  EXPECT_THAT(text, HasSubstr("Left/Right seek -10s / +10s"));
  EXPECT_THAT(text, HasSubstr("Tab next view   BackTab previous view"));
  EXPECT_THAT(text, HasSubstr(",/. Kernels: older / newer step"));
  EXPECT_THAT(text, HasSubstr("z/Z Kernels: zoom in / out"));
  EXPECT_THAT(text, HasSubstr(":trace off|summary|full"));
  for (const KeyBinding& b : KeyTable()) {
    if (b.key.size() == 1 && b.key[0] >= '1' && b.key[0] <= '6') continue;
    EXPECT_THAT(text, HasSubstr(std::string(b.key))) << b.key;
    EXPECT_THAT(text, HasSubstr(std::string(b.help))) << b.key;
  }
  for (const CommandSpec& c : CommandTable()) {
    EXPECT_THAT(text, HasSubstr(":" + std::string(c.name))) << c.name;
  }
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawHelp, LiveModeLeavesReplayKeysOut) {
  ViewState v;
  v.help = true;
  const std::string text = Text(DrawHelp(v, Rect{0, 0, 80, 23}));
  EXPECT_THAT(text, HasSubstr("Tab next view"));
  EXPECT_THAT(text, Not(HasSubstr("seek -10s")));
}

// With room (a tall terminal), keys stand in two columns and every command
// has its help on its row.
TEST(ConsoleDrawHelp, FullLayoutWhenItFits) {
  ViewState v;
  v.replay = true;
  v.help = true;
  const int full = HelpHeight(v, 100);
  EXPECT_GT(full, 23);
  EXPECT_EQ(HelpHeight(v, 100, full), full);
  EXPECT_LT(HelpHeight(v, 100, full - 1), full);  // compact below that
  const Grid g = DrawFrame(FixtureSnapshot(), v, 100, full + 1);
  const std::string text = Text(g);
  EXPECT_THAT(text, HasSubstr("Up/Down  scroll Log/Experts"));
  EXPECT_THAT(text, HasSubstr("Tab      next view"));
  EXPECT_THAT(text, HasSubstr("/        filter Requests / Log"));
  EXPECT_THAT(text, HasSubstr(":switch tp|ep           move the experts to the TP or EP layout"));
  EXPECT_THAT(text, HasSubstr(",/.      Kernels: older / newer step"));
  EXPECT_TRUE(RowsFit(g));
}

TEST(ConsoleDrawFrame, ComposesHeaderTabsViewCommandAndStatus) {
  ViewState v;
  v.view = View::kMemory;
  const Grid g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  EXPECT_THAT(g.Row(0), StartsWith(" switchyard  RUNNING"));
  EXPECT_THAT(g.Row(1),
              StartsWith(" 1 Overview  2 Kernels  3 Memory  4 Experts  5 Log  6 Requests "));
  // At 80 columns the hint gives up ":cmd" (the command line row says it).
  EXPECT_THAT(g.Row(1), EndsWith("  ?help  q quit "));
  EXPECT_THAT(DrawFrame(FixtureSnapshot(), v, 100, 24).Row(1), EndsWith(":cmd  ?help  q quit "));
  EXPECT_EQ(g.at(27, 1).style.bg, Color::kCyan);  // "3 Memory" is the active tab
  EXPECT_THAT(g.Row(2), StartsWith("KV cache pages per device"));
  EXPECT_THAT(g.Row(22), StartsWith("press : for commands, ? for help"));
  EXPECT_THAT(g.Row(23), StartsWith(" ● live "));
}

TEST(ConsoleDrawFrame, CommandLineConfirmAndMessages) {
  ViewState v;
  v.command_active = true;
  v.command_text = "tr";
  v.command_cursor = 2;
  v.completions = {"trace", "trial"};
  Grid g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  EXPECT_THAT(g.Row(22), StartsWith(":tr   [trace trial]"));
  EXPECT_EQ(g.at(3, 22).style.attrs & kReverse, kReverse);  // cursor cell
  v = ViewState{};
  v.confirm = "Really stop the engine? (y/n)";
  g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  EXPECT_THAT(g.Row(22), StartsWith("Really stop the engine? (y/n)"));
  v = ViewState{};
  v.message = "unknown command 'x'";
  v.message_error = true;
  g = DrawFrame(FixtureSnapshot(), v, 80, 24);
  EXPECT_THAT(g.Row(22), StartsWith("unknown command 'x'"));
  EXPECT_EQ(g.at(0, 22).style.fg, Color::kRed);
}

TEST(ConsoleDrawFrame, EveryViewFitsEverySize) {
  const Snapshot s = FixtureSnapshot();
  const Snapshot empty;
  const int sizes[][2] = {{80, 24}, {120, 40}, {200, 60}, {40, 8}, {41, 9},
                          {39, 24}, {80, 7},   {1, 1},    {0, 0},  {300, 3}};
  for (const auto& snap : {s, empty}) {
    for (int view = 0; view < kViewCount; ++view) {
      for (bool help : {false, true}) {
        for (const auto& sz : sizes) {
          ViewState v;
          v.view = static_cast<View>(view);
          v.help = help;
          v.debug = true;
          const Grid g = DrawFrame(snap, v, sz[0], sz[1]);
          EXPECT_EQ(g.width(), sz[0]);
          EXPECT_EQ(g.height(), sz[1]);
          EXPECT_TRUE(RowsFit(g)) << view << " " << sz[0] << "x" << sz[1];
        }
      }
    }
  }
}

TEST(ConsoleDrawFrame, TooSmallSaysSo) {
  const Grid g = DrawFrame(FixtureSnapshot(), ViewState{}, 39, 10);
  EXPECT_THAT(g.Row(0), StartsWith("terminal too small"));
  EXPECT_THAT(g.Row(1), StartsWith("need 40x8"));
}

TEST(ConsoleDrawFrame, ResizeRedrawsToTheNewSize) {
  ViewState v;
  v.view = View::kKernels;
  const Snapshot s = FixtureSnapshot();
  const Grid big = DrawFrame(s, v, 120, 30);
  const Grid small = DrawFrame(s, v, 80, 24);
  // The lane stretches with the width; the status line stays on the last row.
  EXPECT_EQ(DisplayWidth(big.Row(3)), 120);
  EXPECT_THAT(big.Row(3), HasSubstr("│"));
  EXPECT_THAT(small.Row(23), StartsWith(" ● live"));
  EXPECT_THAT(big.Row(29), StartsWith(" ● live"));
}

TEST(ConsoleViewNames, ParseAndTitle) {
  EXPECT_EQ(ParseView("Kernels"), View::kKernels);
  EXPECT_EQ(ParseView("log"), View::kLog);
  EXPECT_EQ(ParseView("Requests"), View::kRequests);
  EXPECT_STREQ(ViewTitle(View::kRequests), "Requests");
  EXPECT_EQ(ParseView("nope"), std::nullopt);
  EXPECT_STREQ(ViewTitle(View::kExperts), "Experts");
}

}  // namespace
}  // namespace sy::console
