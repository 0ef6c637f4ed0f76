#include "console/collect/collector.h"

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kS = 1'000'000;

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  SteadyClock fn() {
    return [this] { return now; };
  }
};

telemetry::Envelope Env(uint64_t seq, int64_t t_us, std::string run = "r1") {
  telemetry::Envelope e;
  e.run = std::move(run);
  e.seq = seq;
  e.t_us = t_us;
  return e;
}

telemetry::Step MakeStep(uint64_t seq, int64_t t_us, int prefill, int decode, int batch) {
  telemetry::Step s;
  s.env = Env(seq, t_us);
  s.step = static_cast<int64_t>(seq);
  s.prefill_tokens = prefill;
  s.decode_tokens = decode;
  s.batch_requests = batch;
  s.running = batch;
  s.waiting = 3;
  return s;
}

telemetry::Heartbeat Beat(uint64_t seq, int interval_ms, std::string state = "running") {
  telemetry::Heartbeat h;
  h.env = Env(seq, 0);
  h.interval_ms = interval_ms;
  h.state = std::move(state);
  return h;
}

TEST(ConsoleCollector, PercentileIsNearestRank) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({5}, 99), 5);
  std::vector<int64_t> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile({1, 2, 3}, 50), 2);
}

TEST(ConsoleCollector, ThroughputSeriesPerSecondOfEngineTime) {
  Collector c;
  // 10 steps per second for 3 seconds: 100 prefill + 50 decode tokens each.
  uint64_t seq = 0;
  for (int sec = 0; sec < 3; ++sec) {
    for (int i = 0; i < 10; ++i) {
      c.Consume(MakeStep(seq++, sec * kS + i * 100'000, 100, 50, 4 + sec));
    }
  }
  const Snapshot s = c.TakeSnapshot();
  ASSERT_EQ(s.decode_tps.size(), 3u);
  EXPECT_DOUBLE_EQ(s.prefill_tps[0], 1000);
  EXPECT_DOUBLE_EQ(s.decode_tps[1], 500);
  // The newest second is partial (0.9 s elapsed), so it is scaled up.
  EXPECT_NEAR(s.decode_tps[2], 500 / 0.9, 1e-9);
  EXPECT_DOUBLE_EQ(s.cur_decode_tps, 500);  // last complete second
  EXPECT_DOUBLE_EQ(s.cur_prefill_tps, 1000);
  EXPECT_THAT(s.batch, ElementsAre(4, 5, 6));
  EXPECT_EQ(s.cur_batch, 6);
  EXPECT_EQ(s.cur_waiting, 3);
  EXPECT_EQ(s.steps_seen, 30);
  EXPECT_EQ(s.latest_step, 29);
}

TEST(ConsoleCollector, IdleSecondsAreZeroAndSeriesIsBounded) {
  CollectorOptions o;
  o.series_seconds = 5;
  Collector c(o);
  c.Consume(MakeStep(0, 0, 10, 10, 1));
  c.Consume(MakeStep(1, 3 * kS + 500'000, 10, 10, 1));
  Snapshot s = c.TakeSnapshot();
  ASSERT_EQ(s.decode_tps.size(), 4u);
  EXPECT_DOUBLE_EQ(s.decode_tps[1], 0);
  EXPECT_DOUBLE_EQ(s.decode_tps[2], 0);
  // A heartbeat 20 s later advances time: the series slides to the last 5 s.
  telemetry::Heartbeat h = Beat(0, 500);
  h.env.t_us = 23 * kS;
  c.Consume(h);
  s = c.TakeSnapshot();
  ASSERT_EQ(s.decode_tps.size(), 5u);
  for (double v : s.decode_tps) EXPECT_EQ(v, 0);
}

TEST(ConsoleCollector, LatencyPercentilesOverRecentRequests) {
  CollectorOptions o;
  o.request_window = 100;
  Collector c(o);
  for (int i = 1; i <= 200; ++i) {
    telemetry::RequestDone r;
    r.env = Env(i - 1, i);
    r.ttft_us = i * 1000;  // the window keeps 101..200 ms
    r.tpot_us = i;
    r.output_tokens = i % 2 == 0 ? 10 : 1;  // one-token answers have no TPOT
    c.Consume(r);
  }
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.ttft.count, 100);
  EXPECT_EQ(s.ttft.p50_us, 150'000);
  EXPECT_EQ(s.ttft.p99_us, 199'000);
  EXPECT_EQ(s.tpot.count, 100);  // 100 even ones, all still in the window
  EXPECT_EQ(s.tpot.p50_us, 100);
  EXPECT_EQ(s.requests_seen, 200);
}

TEST(ConsoleCollector, ConnectionStateFollowsHeartbeatAge) {
  FakeClock clock;
  CollectorOptions o;
  o.clock = clock.fn();
  Collector c(o);
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kWaiting);
  c.Consume(Beat(0, 500));
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLive);
  clock.now += 1000ms;  // exactly 2 intervals: still live
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLive);
  clock.now += 1ms;
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kDegraded);
  clock.now += 1500ms;  // 2.501 s = 5 intervals + 1 ms
  Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.conn, ConnState::kLost);
  EXPECT_NEAR(s.heartbeat_age_s, 2.501, 1e-6);
  // A heartbeat proves liveness again...
  c.Consume(Beat(1, 500));
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLive);
  // ...and so does any other message: a console digesting a backlog, its
  // heartbeats queued behind spans, must not call a busy engine lost.
  clock.now += 2400ms;
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kDegraded);
  c.Consume(MakeStep(0, 0, 1, 1, 1));
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLive);
  clock.now += 2501ms;
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLost);
}

// After the engine's lifecycle "stop" its heartbeats end by design: the run
// has ended, the engine is not lost. A new run on the endpoint is live again.
TEST(ConsoleCollector, StopEventEndsTheRunInsteadOfLosingIt) {
  FakeClock clock;
  CollectorOptions o;
  o.clock = clock.fn();
  Collector c(o);
  c.Consume(Beat(0, 500));
  telemetry::Event e;
  e.env = Env(1, kS);
  e.kind = "lifecycle";
  e.name = "stop";
  c.Consume(e);
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kEnded);
  clock.now += 60s;
  Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.conn, ConnState::kEnded);
  EXPECT_STREQ(ConnStateName(s.conn), "ended");
  EXPECT_NEAR(s.heartbeat_age_s, 60, 1e-6);
  telemetry::Heartbeat h = Beat(0, 500);
  h.env.run = "run-next";
  c.Consume(h);
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLive);
}

TEST(ConsoleCollector, BeforeFirstHeartbeatAnyMessageCountsAndDefaultIntervalApplies) {
  FakeClock clock;
  CollectorOptions o;
  o.clock = clock.fn();
  o.default_heartbeat_ms = 1000;
  Collector c(o);
  c.Consume(MakeStep(0, 0, 1, 1, 1));
  clock.now += 1900ms;
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLive);
  clock.now += 200ms;
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kDegraded);
  clock.now += 3000ms;
  EXPECT_EQ(c.TakeSnapshot().conn, ConnState::kLost);
}

TEST(ConsoleCollector, ReplayClockOverridesConnection) {
  Collector c;
  c.SetReplayClock(ReplayClock{1, 10, 2, true});
  c.Consume(Beat(0, 500));
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.conn, ConnState::kReplay);
  EXPECT_DOUBLE_EQ(s.replay.speed, 2);
}

TEST(ConsoleCollector, ExpertCountsSumOverWindowAndAggregatePerDevice) {
  CollectorOptions o;
  o.expert_window_steps = 2;
  Collector c(o);
  telemetry::Meta meta;
  meta.env = Env(0, 0);
  meta.devices = 2;
  meta.expert_device = {0, 0, 1, 1};
  c.Consume(meta);
  for (int i = 0; i < 3; ++i) {
    telemetry::ExpertLoad e;
    e.env = Env(i, i * 1000);
    e.step = i;
    // The first message falls out of the 2-step window.
    const int64_t k = i == 0 ? 1000 : 1;
    e.counts = {{k, 2 * k, 3 * k, 4 * k}, {0, 0, 5 * k, 0}};
    c.Consume(e);
  }
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.expert_window_steps, 2);
  ASSERT_EQ(s.expert_counts.size(), 2u);
  EXPECT_THAT(s.expert_counts[0], ElementsAre(2, 4, 6, 8));
  EXPECT_THAT(s.expert_counts[1], ElementsAre(0, 0, 10, 0));
  EXPECT_THAT(s.expert_totals, ElementsAre(2, 4, 16, 8));
  EXPECT_THAT(s.device_tokens, ElementsAre(6, 24));
}

TEST(ConsoleCollector, ExpertDeviceMapFromNewestExpertLoadWins) {
  Collector c;
  telemetry::ExpertLoad e;
  e.env = Env(0, 0);
  e.counts = {{1, 2, 4}};
  e.expert_device = {2, 1, 0};
  c.Consume(e);
  EXPECT_THAT(c.TakeSnapshot().device_tokens, ElementsAre(4, 2, 1));
  EXPECT_THAT(c.TakeSnapshot().expert_device, ElementsAre(2, 1, 0));
}

TEST(ConsoleCollector, KernelStatsAggregateAcrossDevicesByShare) {
  Collector c;
  telemetry::KernelStats k;
  k.env = Env(0, 0);
  k.step = 7;
  k.kernels = {
      {0, "moe_ffn", "compute", 4, 600, 200, 0, 0},
      {1, "moe_ffn", "compute", 4, 200, 100, 0, 0},
      {0, "all_to_all", "comm", 2, 200, 150, 0, 0},
  };
  c.Consume(k);
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.kstats_step, 7);
  ASSERT_EQ(s.top_kernels.size(), 2u);
  EXPECT_EQ(s.top_kernels[0].name, "moe_ffn");
  EXPECT_EQ(s.top_kernels[0].count, 8);
  EXPECT_EQ(s.top_kernels[0].total_us, 800);
  EXPECT_EQ(s.top_kernels[0].mean_us, 100);
  EXPECT_EQ(s.top_kernels[0].max_us, 200);
  EXPECT_DOUBLE_EQ(s.top_kernels[0].share, 0.8);
  EXPECT_EQ(s.top_kernels[1].kind, "comm");
  EXPECT_DOUBLE_EQ(s.top_kernels[1].share, 0.2);
}

TEST(ConsoleCollector, SpansKeepLatestStepSortedByDeviceThenStart) {
  Collector c;
  telemetry::Spans sp;
  sp.env = Env(0, 0);
  sp.step = 3;
  telemetry::Span a, b, d;
  a.device = 1, a.start_us = 5, a.name = "a";
  b.device = 0, b.start_us = 9, b.name = "b";
  d.device = 0, d.start_us = 2, d.name = "d";
  sp.spans = {a, b, d};
  c.Consume(sp);
  telemetry::Spans older = sp;
  older.env.seq = 1;
  older.step = 2;
  older.spans = {a};
  c.Consume(older);  // an older step does not replace the newer one
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.spans_step, 3);
  ASSERT_EQ(s.spans.size(), 3u);
  EXPECT_EQ(s.spans[0].name, "d");
  EXPECT_EQ(s.spans[1].name, "b");
  EXPECT_EQ(s.spans[2].name, "a");
  EXPECT_EQ(s.spans_seen, 4);
}

TEST(ConsoleCollector, GapsFromSequenceHolesPerTopicAndTransportCountersWin) {
  Collector c;
  c.Consume(MakeStep(0, 0, 1, 1, 1));
  c.Consume(MakeStep(3, 1, 1, 1, 1));  // 1 and 2 missing
  c.Consume(Beat(0, 500));             // another topic, own sequence
  c.Consume(Beat(2, 500));             // 1 missing
  Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.gaps, 3);
  EXPECT_EQ(s.received, 4);
  c.SetTransportCounters(TransportCounters{10, 7, 2});
  s = c.TakeSnapshot();
  EXPECT_EQ(s.received, 10);
  EXPECT_EQ(s.gaps, 7);
  EXPECT_EQ(s.malformed, 2);
}

TEST(ConsoleCollector, PausedStateFromMetaHeartbeatAndCommandReply) {
  Collector c;
  telemetry::Meta meta;
  meta.env = Env(0, 0);
  meta.trace_level = "summary";
  c.Consume(meta);
  Snapshot s = c.TakeSnapshot();
  EXPECT_FALSE(s.paused);
  EXPECT_EQ(s.engine_state, "running");
  EXPECT_EQ(s.trace_level, "summary");
  c.ApplyCommandResult("pause", {{"paused", true}});
  EXPECT_TRUE(c.TakeSnapshot().paused);
  c.Consume(Beat(0, 500, "running"));
  EXPECT_FALSE(c.TakeSnapshot().paused);
  c.Consume(Beat(1, 500, "paused"));
  s = c.TakeSnapshot();
  EXPECT_TRUE(s.paused);
  EXPECT_EQ(s.engine_state, "paused");
  c.ApplyCommandResult("trace", {{"level", "full"}});
  EXPECT_EQ(c.TakeSnapshot().trace_level, "full");
}

TEST(ConsoleCollector, EventsBecomeLogLinesAndStopIsNoticed) {
  Collector c;
  telemetry::Event e;
  e.env = Env(0, 2 * kS);
  e.kind = "command";
  e.name = "pause";
  e.phase = "done";
  e.message = "scheduler paused";
  c.Consume(e);
  e.env.seq = 1;
  e.kind = "lifecycle";
  e.name = "stop";
  e.phase = "";
  e.message = "bye";
  c.Consume(e);
  c.AddLog(LogLevel::kError, "console note");
  const Snapshot s = c.TakeSnapshot();
  ASSERT_EQ(s.log.size(), 3u);
  EXPECT_EQ(s.log[0].text, "command pause done: scheduler paused");
  EXPECT_EQ(s.log[0].level, LogLevel::kCommand);
  EXPECT_EQ(s.log[0].t_us, 2 * kS);
  EXPECT_EQ(s.log[1].text, "lifecycle stop: bye");
  EXPECT_EQ(s.log[2].t_us, -1);
  EXPECT_TRUE(s.run_stopped);
}

TEST(ConsoleCollector, LogIsBounded) {
  CollectorOptions o;
  o.log_capacity = 3;
  Collector c(o);
  for (int i = 0; i < 5; ++i) c.AddLog(LogLevel::kInfo, "line " + std::to_string(i));
  const Snapshot s = c.TakeSnapshot();
  ASSERT_EQ(s.log.size(), 3u);
  EXPECT_EQ(s.log.front().text, "line 2");
}

TEST(ConsoleCollector, NewRunResetsRunStateButKeepsLog) {
  Collector c;
  c.Consume(MakeStep(0, 0, 5, 5, 1));
  telemetry::Step other = MakeStep(0, 0, 7, 7, 2);
  other.env.run = "r2";
  c.Consume(other);
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.run, "r2");
  EXPECT_EQ(s.steps_seen, 1);
  ASSERT_FALSE(s.log.empty());
  EXPECT_THAT(s.log.back().text, HasSubstr("new run r2"));
}

TEST(ConsoleCollector, OccupancySortedByDevice) {
  Collector c;
  telemetry::Occupancy occ;
  occ.env = Env(0, 0);
  // Both pools per device: KV pages and recurrent-state slots, with bytes,
  // and the prefix cache's figures.
  occ.devices = {
      {1, 10, 100, 2, 2, 8, 10 * 20480, 100 * 20480, 2 * 448512, 8 * 448512, 0, 1, 0, 0.0, 0},
      {0, 50, 100, 3, 3, 8, 50 * 20480, 100 * 20480, 3 * 448512, 8 * 448512, 640, 12, 2, 0.25, 30}};
  occ.running = 5;
  occ.waiting = 1;
  c.Consume(occ);
  const Snapshot s = c.TakeSnapshot();
  ASSERT_EQ(s.kv.size(), 2u);
  EXPECT_EQ(s.kv[0].device, 0);
  EXPECT_EQ(s.kv[0].kv_pages_used, 50);
  EXPECT_EQ(s.kv[0].state_slots_used, 3);
  EXPECT_EQ(s.kv[0].state_slots_total, 8);
  EXPECT_EQ(s.kv[0].kv_bytes_used, 50 * 20480);
  EXPECT_EQ(s.kv[0].kv_bytes_total, 100 * 20480);
  EXPECT_EQ(s.kv[0].state_bytes_used, 3 * 448512);
  EXPECT_EQ(s.kv[1].state_bytes_total, 8 * 448512);
  EXPECT_EQ(s.kv[0].cache_tokens, 640);
  EXPECT_EQ(s.kv[0].cache_nodes, 12);
  EXPECT_EQ(s.kv[0].cache_slots, 2);
  EXPECT_EQ(s.kv[0].cache_hit_rate, 0.25);
  EXPECT_EQ(s.kv[0].cache_evicted_pages, 30);
  EXPECT_EQ(s.kv[1].cache_nodes, 1);
  EXPECT_EQ(s.cur_running, 5);
  EXPECT_EQ(s.cur_waiting, 1);
}

telemetry::Requests Snap(uint64_t seq, int64_t step, std::vector<int64_t> running,
                         int waiting_total) {
  telemetry::Requests r;
  r.env = Env(seq, step * 1000);
  r.step = step;
  for (int64_t id : running) {
    telemetry::RequestProgress p;
    p.id = id;
    p.device = 0;
    r.running.push_back(p);
  }
  r.running_total = static_cast<int>(running.size());
  r.waiting_total = waiting_total;
  return r;
}

TEST(ConsoleCollector, LatestRequestsSnapshotWins) {
  Collector c;
  EXPECT_FALSE(c.TakeSnapshot().have_requests);
  c.Consume(Snap(0, 5, {1, 2}, 0));
  c.Consume(Snap(1, 9, {2, 3, 4}, 7));
  c.Consume(Snap(2, 8, {1}, 0));  // older step, arrived late: ignored
  Snapshot s = c.TakeSnapshot();
  ASSERT_TRUE(s.have_requests);
  EXPECT_EQ(s.requests.step, 9);
  ASSERT_EQ(s.requests.running.size(), 3u);
  EXPECT_EQ(s.requests.running[2].id, 4);
  EXPECT_EQ(s.requests.waiting_total, 7);
  // A seek (Reset) forgets it, as it forgets every run state.
  c.Reset();
  EXPECT_FALSE(c.TakeSnapshot().have_requests);
}

TEST(ConsoleCollector, FinishedRequestsAreKeptBoundedAndCancelledHaveNoLatency) {
  CollectorOptions o;
  o.finished_kept = 3;
  Collector c(o);
  for (int i = 0; i < 5; ++i) {
    telemetry::RequestDone d;
    d.env = Env(i, i * kS);
    d.id = 10 + i;
    d.output_tokens = 4;
    d.ttft_us = 1000 * (i + 1);
    d.tpot_us = 100;
    d.finish = "eos";
    d.cached_tokens = i;
    d.preemptions = i % 2;
    c.Consume(d);
  }
  telemetry::RequestDone cancelled;
  cancelled.env = Env(5, 5 * kS);
  cancelled.id = 99;
  cancelled.output_tokens = 0;  // cancelled while waiting: no first token
  cancelled.finish = "cancelled";
  c.Consume(cancelled);
  const Snapshot s = c.TakeSnapshot();
  ASSERT_EQ(s.finished.size(), 3u);
  EXPECT_EQ(s.finished[0].id, 13);
  EXPECT_EQ(s.finished[1].cached_tokens, 4);
  EXPECT_EQ(s.finished[2].id, 99);
  EXPECT_EQ(s.requests_seen, 6);
  // Its TTFT of 0 would drag the percentiles down: only the 5 answered count.
  EXPECT_EQ(s.ttft.count, 5);
  EXPECT_EQ(s.ttft.p50_us, 3000);
}

TEST(ConsoleCollector, RetractionsAreWarningsAndCounted) {
  Collector c;
  telemetry::Event e;
  e.env = Env(0, 3 * kS);
  e.kind = "scheduler";
  e.name = "retract";
  e.message = "request 7 retracted for lack of KV pages; requeued";
  e.detail = {{"id", 7}, {"device", 1}, {"computed", 96}};
  c.Consume(e);
  e.env.seq = 1;
  c.Consume(e);
  const Snapshot s = c.TakeSnapshot();
  EXPECT_EQ(s.retractions, 2);
  ASSERT_EQ(s.log.size(), 2u);
  EXPECT_EQ(s.log[0].text, "scheduler retract: request 7 retracted for lack of KV pages; requeued");
  EXPECT_EQ(s.log[0].level, LogLevel::kWarn);
}

TEST(ConsoleCollector, StoreCountersSurviveReset) {
  Collector c;
  c.SetStoreCounters(StoreCounters{5, 1, "", "/tmp/x.db"});
  c.Consume(MakeStep(0, 0, 1, 1, 1));
  c.Reset();
  const Snapshot s = c.TakeSnapshot();
  EXPECT_TRUE(s.have_store);
  EXPECT_EQ(s.db_path, "/tmp/x.db");
  EXPECT_EQ(s.store_dropped, 1);
  EXPECT_EQ(s.steps_seen, 0);
  EXPECT_EQ(s.received, 0);
}

}  // namespace
}  // namespace sy::console
