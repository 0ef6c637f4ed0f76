// console_bench_seek: the time to seek in a stored run of at least a million
// spans (issue 7: "time to seek in a run of at least a million spans").
//
// Writes one run through store::Writer (trace level full: `--steps` steps of
// `--spans` spans each, 20 steps a second of engine time, an event every
// 30 s), then times, through the console's ReplayPlayer and store::Reader:
// a seek from the start to the middle (fresh player), seeks back and forth
// across the run, `seek step N`, next / previous event jumps, and the store's
// step -> time and next-event queries alone. Prints one line per figure.
//
//   console_bench_seek [--steps N] [--spans N] [--db PATH]
//
// Exit 0 with figures, 1 if writing or replaying fails.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "console/app/replay_player.h"
#include "tests/console/app/test_store.h"

namespace sy::console {
namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr int64_t kStepUs = 50'000;  // 20 steps per second

int Run(int steps, int spans_per_step, std::string db) {
  testing::TempDir dir;
  if (db.empty()) db = dir / "bench_seek.db";
  const std::string id = "bench-seek";
  const int64_t total_spans = static_cast<int64_t>(steps) * spans_per_step;
  {
    store::WriterOptions wo;
    wo.queue_max_bytes = 0;  // a bench writes faster than any engine: never drop
    wo.queue_capacity = 1 << 22;
    auto w = store::Writer::Open(db, wo);
    if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 1;
    const auto t0 = Clock::now();
    telemetry::Meta meta;
    meta.env = testing::Env(id, 0, 0);
    meta.model.preset = "tiny-moe";
    meta.model.layers = 4;
    meta.model.attention = {"mha", "mha", "mha", "mha"};
    meta.model.experts = 8;
    meta.devices = 4;
    meta.layout = "EP";
    meta.trace_level = "full";
    meta.expert_device = {0, 0, 1, 1, 2, 2, 3, 3};
    (*w)->Enqueue(meta);
    uint64_t seq = 1;
    for (int i = 0; i < steps; ++i) {
      const int64_t t = i * kStepUs;
      if (t % 30'000'000 == 0 && i > 0) {
        telemetry::Event e;
        e.env = testing::Env(id, seq++, t);
        e.kind = "switch";
        e.name = "switch";
        e.phase = "done";
        e.message = "EP -> TP";
        (*w)->Enqueue(e);
      }
      telemetry::Step s;
      s.env = testing::Env(id, seq++, t);
      s.step = i;
      s.start_us = t;
      s.dur_us = kStepUs / 2;
      s.decode_tokens = 32;
      s.batch_requests = 32;
      (*w)->Enqueue(s);
      telemetry::Spans sp;
      sp.env = testing::Env(id, seq++, t);
      sp.step = i;
      sp.spans.resize(spans_per_step);
      for (int k = 0; k < spans_per_step; ++k) {
        telemetry::Span& x = sp.spans[k];
        x.device = k % 4;
        x.layer = (k / 4) % 4;
        x.name = k % 3 == 0 ? "expert_ffn" : k % 3 == 1 ? "attention" : "dispatch";
        x.kind = k % 3 == 2 ? "comm" : "compute";
        x.start_us = t + k * 10;
        x.dur_us = 10;
      }
      (*w)->Enqueue(std::move(sp));
      if (i % 2000 == 1999) (*w)->Flush();
    }
    (*w)->Flush();
    const store::WriterCounters c = (*w)->counters();
    std::printf("seek bench: wrote %d steps, %lld spans in %.0f ms (%lld dropped)\n", steps,
                static_cast<long long>(total_spans), MsSince(t0),
                static_cast<long long>(c.dropped));
    if (c.dropped != 0) return 1;
  }

  Collector collector;
  auto t0 = Clock::now();
  auto p = ReplayPlayer::Open(db, id, &collector);
  if (!p.ok()) return std::fprintf(stderr, "%s\n", p.status().ToString().c_str()), 1;
  const double open_ms = MsSince(t0);
  ReplayPlayer& player = **p;
  player.set_playing(false);
  const double dur_s = player.clock().duration_s;
  auto check = [](const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  t0 = Clock::now();
  check(player.SeekTo(dur_s / 2));
  const double middle_ms = MsSince(t0);

  // Back and forth across the run: 20 seeks to spread positions.
  std::vector<double> seeks;
  for (int k = 0; k < 20; ++k) {
    const double target = dur_s * ((k * 7) % 20) / 20.0;
    t0 = Clock::now();
    check(player.SeekTo(target));
    seeks.push_back(MsSince(t0));
  }
  std::sort(seeks.begin(), seeks.end());

  t0 = Clock::now();
  check(player.SeekToStep(steps / 3));
  const double step_ms = MsSince(t0);

  check(player.SeekTo(dur_s / 2));
  std::vector<double> jumps;
  for (int k = 0; k < 10; ++k) {
    t0 = Clock::now();
    auto ev = player.JumpToEvent(k % 2 == 0);
    if (!ev.ok()) check(ev.status());
    jumps.push_back(MsSince(t0));
  }
  std::sort(jumps.begin(), jumps.end());

  // The store's navigation queries alone.
  store::Reader& r = player.reader();
  constexpr int kQueries = 1000;
  t0 = Clock::now();
  for (int k = 0; k < kQueries; ++k) {
    auto t = r.StepTime(id, (static_cast<int64_t>(k) * 7919) % steps);
    if (!t.ok()) check(t.status());
  }
  const double step_query_us = MsSince(t0) * 1000 / kQueries;
  t0 = Clock::now();
  for (int k = 0; k < kQueries; ++k) {
    auto e = r.NearestEvent(id, (static_cast<int64_t>(k) * 7919 % steps) * kStepUs, true);
    if (!e.ok()) check(e.status());
  }
  const double event_query_us = MsSince(t0) * 1000 / kQueries;

  std::printf("seek bench: run of %lld spans, %.0f s of engine time, open %.0f ms\n",
              static_cast<long long>(total_spans), dur_s, open_ms);
  std::printf("seek to middle (fresh player): %.1f ms\n", middle_ms);
  std::printf("seek across the run: median %.1f ms, max %.1f ms (20 seeks)\n",
              seeks[seeks.size() / 2], seeks.back());
  std::printf("seek step %d: %.1f ms\n", steps / 3, step_ms);
  std::printf("next/previous event jump: median %.1f ms, max %.1f ms\n", jumps[jumps.size() / 2],
              jumps.back());
  std::printf("store step->time query: %.1f us, next-event query: %.1f us\n", step_query_us,
              event_query_us);
  return 0;
}

}  // namespace
}  // namespace sy::console

int main(int argc, char** argv) {
  int steps = 10000, spans = 100;
  std::string db;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--spans") == 0) spans = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--db") == 0) db = argv[i + 1];
  }
  if (steps < 10 || spans < 1) {
    std::fprintf(stderr, "usage: console_bench_seek [--steps N>=10] [--spans N>=1] [--db PATH]\n");
    return 2;
  }
  return sy::console::Run(steps, spans, db);
}
