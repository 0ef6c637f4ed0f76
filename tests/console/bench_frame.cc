// console_bench_frame: the console's frame time at 200x60 (issue 7), the CPU
// work of one UI tick: Collector::TakeSnapshot (the copy the UI thread takes
// under the collector's lock) and DrawFrame (every panel composed into a
// Grid). Writing the Grid to the terminal is ncurses' diff and the
// terminal's business, and is left out.
//
// The Collector is filled from a stored run (`--db FILE [--run ID]`, played
// to its end through the console's ReplayPlayer, as replay does), or by
// default from the deterministic run of the golden snapshots
// (tests/console/draw/snapshot_fixture.h). Each view, and the help overlay,
// is drawn `--frames` times at each size.
//
//   console_bench_frame [--db FILE] [--run ID] [--frames N]
//
// Prints one line per view and size (mean and p99 in ms); exit 1 on error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "console/app/replay_player.h"
#include "console/draw/views.h"
#include "tests/console/draw/snapshot_fixture.h"

namespace sy::console {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Timing {
  double mean = 0, p99 = 0;
};

Timing Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  for (double x : ms) t.mean += x;
  t.mean /= static_cast<double>(ms.size());
  t.p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  return t;
}

int Run(const std::string& db, const std::string& run, int frames) {
  Collector collector;
  std::string source = "the golden-snapshot run (tests/console/draw/snapshot_fixture.h)";
  if (db.empty()) {
    for (const testing::SnapItem& item : testing::SnapStream().Build()) {
      if (item.console_line.empty()) collector.Consume(item.msg);
    }
  } else {
    auto p = ReplayPlayer::Open(db, run, &collector);
    if (!p.ok()) return std::fprintf(stderr, "%s\n", p.status().ToString().c_str()), 1;
    const auto t0 = Clock::now();
    if (Status s = (*p)->PlayToEnd(); !s.ok()) {
      return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    }
    source = "run " + (*p)->run().id + " of " + db;
    std::printf("frame bench: replayed %s to its end in %.0f ms\n", source.c_str(), MsSince(t0));
  }
  const Snapshot probe = collector.TakeSnapshot();
  std::printf("frame bench: %s; %d devices, %zu traced steps kept, %zu log lines\n", source.c_str(),
              probe.have_meta ? probe.meta.devices : 0, probe.span_steps.size(), probe.log.size());

  constexpr int kSizes[][2] = {{200, 60}, {80, 24}};
  double worst_mean = 0;
  for (const auto& size : kSizes) {
    for (int i = 0; i <= kViewCount; ++i) {
      ViewState v;
      v.replay = !db.empty();
      if (i == kViewCount) {
        v.help = true;
      } else {
        v.view = static_cast<View>(i);
      }
      std::vector<double> snap_ms, draw_ms, total_ms;
      for (int f = 0; f < frames; ++f) {
        const auto t0 = Clock::now();
        const Snapshot s = collector.TakeSnapshot();
        const double snap = MsSince(t0);
        const auto t1 = Clock::now();
        const Grid g = DrawFrame(s, v, size[0], size[1]);
        const double draw = MsSince(t1);
        if (g.width() != size[0] || g.height() != size[1]) {
          return std::fprintf(stderr, "frame of the wrong size\n"), 1;
        }
        snap_ms.push_back(snap);
        draw_ms.push_back(draw);
        total_ms.push_back(snap + draw);
      }
      const Timing snap = Summarize(snap_ms), draw = Summarize(draw_ms),
                   total = Summarize(total_ms);
      if (size[0] == 200) worst_mean = std::max(worst_mean, total.mean);
      const std::string at = std::to_string(size[0]) + "x" + std::to_string(size[1]);
      std::printf(
          "frame %-6s %-9s: %.2f ms mean, %.2f ms p99 (snapshot %.2f ms, draw %.2f ms mean)\n",
          at.c_str(), i == kViewCount ? "help" : ViewTitle(v.view), total.mean, total.p99,
          snap.mean, draw.mean);
    }
  }
  std::printf("frame time at 200x60: %.2f ms for the slowest view (mean of %d frames)\n",
              worst_mean, frames);
  return 0;
}

}  // namespace
}  // namespace sy::console

int main(int argc, char** argv) {
  std::string db, run;
  int frames = 200;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--db") == 0 && has_value) {
      db = argv[++i];
    } else if (std::strcmp(argv[i], "--run") == 0 && has_value) {
      run = argv[++i];
    } else if (std::strcmp(argv[i], "--frames") == 0 && has_value) {
      frames = std::atoi(argv[++i]);
    } else {
      frames = 0;
      break;
    }
  }
  if (frames < 1) {
    std::fprintf(stderr, "usage: console_bench_frame [--db FILE] [--run ID] [--frames N>=1]\n");
    return 2;
  }
  return sy::console::Run(db, run, frames);
}
