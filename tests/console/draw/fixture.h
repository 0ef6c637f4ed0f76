// A fixed, realistic Snapshot for the headless panel tests.
#pragma once

#include <string>
#include <vector>

#include "console/collect/snapshot.h"
#include "console/draw/grid.h"

namespace sy::console::testing {

inline Snapshot FixtureSnapshot() {
  Snapshot s;
  s.conn = ConnState::kLive;
  s.have_meta = true;
  s.run = "run-42";
  s.meta.env.run = "run-42";
  s.meta.model.preset = "tiny-moe";
  s.meta.model.params = 12'300'000;
  s.meta.model.layers = 4;
  s.meta.model.experts = 8;
  s.meta.model.top_k = 2;
  s.meta.model.page_size = 16;
  s.meta.model.dtype = "fp32";
  s.meta.devices = 2;
  s.meta.layout = "EP";
  s.meta.trace_level = "full";
  s.meta.workload = "poisson 20 req/s";
  s.meta.kv_pages_per_device = 512;
  s.meta.expert_device = {0, 0, 0, 0, 1, 1, 1, 1};
  s.engine_state = "running";
  s.trace_level = "full";
  s.latest_step = 1234;
  s.latest_t_us = 60'000'000;
  for (int i = 0; i < 60; ++i) {
    s.prefill_tps.push_back(1000.0 + 10 * i);
    s.decode_tps.push_back(i % 10 * 100.0);
    s.batch.push_back(i % 8);
    s.running.push_back(8);
    s.waiting.push_back(i % 3);
  }
  s.cur_prefill_tps = 12'345;
  s.cur_decode_tps = 850;
  s.cur_batch = 7;
  s.cur_running = 8;
  s.cur_waiting = 2;
  s.finished_total = 1500;
  s.generated_total = 45'600;
  s.ttft = {12'340, 45'670, 200};
  s.tpot = {850, 2'100, 180};

  s.spans_step = 1234;
  auto span = [](int dev, const char* name, const char* kind, int64_t start, int64_t dur) {
    telemetry::Span sp;
    sp.device = dev;
    sp.layer = 0;
    sp.name = name;
    sp.kind = kind;
    sp.start_us = start;
    sp.dur_us = dur;
    return sp;
  };
  // 1000 us step: compute 0-400, comm 400-600, compute 600-1000 (device 0);
  // device 1 idles in the first half.
  s.spans = {span(0, "attn", "compute", 0, 400), span(0, "all_to_all", "comm", 400, 200),
             span(0, "moe_ffn", "compute", 600, 400), span(1, "all_to_all", "comm", 400, 200),
             span(1, "moe_ffn", "compute", 600, 400)};
  s.kstats_step = 1234;
  // One step kept: per step per device is half the two devices' total.
  s.top_kernels = {{"moe_ffn", "compute", 8, 800, 100, 200, 0.5, 1, 400, 400, 400},
                   {"attn", "compute", 4, 400, 100, 120, 0.25, 1, 200, 200, 200},
                   {"all_to_all", "comm", 4, 400, 100, 150, 0.25, 1, 200, 200, 200}};
  // A model without linear layers: no state slots. 128 KiB pages.
  s.kv = {{0, 128, 512, 5, 0, 0, 128 * 131072, 512 * 131072, 0, 0},
          {1, 480, 512, 3, 0, 0, 480 * 131072, 512 * 131072, 0, 0}};
  s.expert_window_steps = 64;
  s.expert_counts = {{100, 0, 50, 25, 0, 0, 0, 10},
                     {10, 10, 10, 10, 10, 10, 10, 10},
                     {0, 0, 0, 0, 80, 80, 0, 0},
                     {5, 5, 5, 5, 5, 5, 5, 5}};
  s.expert_totals = {115, 15, 65, 40, 95, 95, 15, 25};
  s.expert_device = s.meta.expert_device;
  s.device_tokens = {235, 230};
  s.log = {{1'500'000, LogLevel::kInfo, "lifecycle start: serving tiny-moe"},
           {-1, LogLevel::kCommand, "> :pause"},
           {2'000'000, LogLevel::kCommand, "command pause done: scheduler paused"},
           {-1, LogLevel::kError, "< :trace loud failed: INVALID_ARGUMENT: bad level"}};
  // Requests view: one decoding, one in prefill after a retraction, one of
  // three waiting; two finished, the newer cancelled before its first token.
  auto progress = [](int64_t id, int device, int prompt, int computed, int generated, int cached,
                     int preemptions, int64_t arrival_us) {
    return telemetry::RequestProgress{.id = id,
                                      .device = device,
                                      .prompt_tokens = prompt,
                                      .computed = computed,
                                      .generated = generated,
                                      .max_new_tokens = 16,
                                      .cached_tokens = cached,
                                      .preemptions = preemptions,
                                      .arrival_us = arrival_us,
                                      .first_token_us = generated > 0 ? arrival_us + 900 : -1};
  };
  s.have_requests = true;
  s.requests.step = 1234;
  s.requests.running = {progress(40, 0, 32, 40, 8, 16, 0, 58'500'000),
                        progress(41, 1, 36, 20, 4, 0, 1, 59'250'000)};
  s.requests.waiting = {progress(43, -1, 32, 0, 0, 0, 0, 59'990'000)};
  s.requests.running_total = 2;
  s.requests.waiting_total = 3;
  s.retractions = 1;
  telemetry::RequestDone done;
  done.id = 38;
  done.device = 1;
  done.prompt_tokens = 32;
  done.output_tokens = 16;
  done.ttft_us = 900;
  done.tpot_us = 210;
  done.e2e_us = 4'050;
  done.finish = "length";
  done.cached_tokens = 16;
  s.finished.push_back(done);
  done.id = 39;
  done.output_tokens = 0;
  done.ttft_us = 0;
  done.e2e_us = 1'200'000;
  done.finish = "cancelled";
  done.cached_tokens = 0;
  done.preemptions = 2;
  s.finished.push_back(done);

  s.received = 12'345;
  s.gaps = 0;
  s.have_store = true;
  s.store_written = 12'000;
  s.store_dropped = 0;
  s.db_path = "/tmp/runs.db";
  return s;
}

// The fixture as a hybrid model (tiny-hybrid-like) would report it: MLA
// pages of 20 KiB and recurrent-state slots of 438 KiB, one per request.
inline Snapshot HybridFixtureSnapshot() {
  Snapshot s = FixtureSnapshot();
  s.meta.model.preset = "tiny-hybrid";
  s.meta.model.arch = "bailing_hybrid";
  s.meta.model.layers = 4;
  s.meta.model.attention = {"kda", "kda", "kda", "mla"};
  s.meta.kv_pages_per_device = 200;
  s.meta.state_slots_per_device = 8;
  constexpr int64_t kPage = 20480, kSlot = 448512;
  s.kv = {{0, 40, 200, 3, 3, 8, 40 * kPage, 200 * kPage, 3 * kSlot, 8 * kSlot},
          {1, 130, 200, 8, 8, 8, 130 * kPage, 200 * kPage, 8 * kSlot, 8 * kSlot}};
  s.cur_running = 11;
  s.cur_waiting = 4;
  return s;
}

// The fixture with a prefix cache on both devices: device 0 has reused and
// evicted, device 1 holds a little and has not hit yet.
inline Snapshot CacheFixtureSnapshot() {
  Snapshot s = FixtureSnapshot();
  s.kv[0].cache_tokens = 1500;
  s.kv[0].cache_nodes = 34;
  s.kv[0].cache_hit_rate = 0.42;
  s.kv[0].cache_evicted_pages = 120;
  s.kv[1].cache_tokens = 96;
  s.kv[1].cache_nodes = 5;
  return s;
}

// The fixture under an EPLB placement: 8 experts + 2 redundant = 10 slots,
// 5 per device. L0 replicates e0 and e2, L1 e0 and e1, L2 e4 and e5 (its
// hot pair, both replicas of e5 still on device 1: the least balanced
// layer), L3 e0 and e1. slot_tokens splits each expert's window tokens over
// its replicas, as the Collector does; a rebalance has just finished.
inline Snapshot EplbFixtureSnapshot() {
  Snapshot s = FixtureSnapshot();
  s.slot_device = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  s.phy2log = {{0, 1, 3, 5, 6, 0, 2, 4, 7, 2},
               {0, 1, 2, 3, 4, 5, 6, 7, 0, 1},
               {0, 1, 2, 3, 4, 5, 6, 7, 4, 5},
               {0, 1, 2, 3, 4, 5, 6, 7, 0, 1}};
  s.placement_reported = true;
  s.slot_tokens = {{50, 0, 25, 0, 0, 50, 25, 0, 10, 25},
                   {5, 5, 10, 10, 10, 10, 10, 10, 5, 5},
                   {0, 0, 0, 0, 40, 40, 0, 0, 40, 40},
                   {2.5, 2.5, 5, 5, 5, 5, 5, 5, 2.5, 2.5}};
  s.balancedness = {92.5 / 110, 1.0, 80.0 / 120, 1.0};
  s.balancedness_trend = {{0.5, 0.6, 0.84}, {1.0, 1.0}, {0.9, 0.7, 0.5, 0.67}, {1.0}};
  s.rebalance.phase = "measured";
  s.rebalance.layers_done = 4;
  s.rebalance.measured_before = 0.64;
  s.rebalance.measured_after = 0.91;
  s.rebalance.experts_moved = 5;
  s.rebalance.before = 0.66;
  s.rebalance.after = 0.94;
  s.rebalance.longest_pause_ms = 0.8;
  s.rebalance.moe_ms_before = 4.1;
  s.rebalance.moe_ms_after = 3.2;
  s.rebalance.auto_known = true;
  s.rebalance.auto_every = 500;
  s.rebalance.auto_min_gain = 0.05;
  return s;
}

// True when no row is wider than the grid (a Grid cannot overflow by
// construction, but the text of each row must also not exceed it).
// s repeated n times (bars are runs of one glyph).
inline std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

inline bool RowsFit(const Grid& g) {
  for (int y = 0; y < g.height(); ++y) {
    if (DisplayWidth(g.Row(y)) != g.width()) return false;
  }
  return true;
}

}  // namespace sy::console::testing
