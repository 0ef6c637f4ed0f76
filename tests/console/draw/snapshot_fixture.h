// A synthetic, fully deterministic 30 s run for the golden snapshot tests
// (snapshot_test.cc): the telemetry a hybrid MoE engine on 4 devices would
// publish, fed through a real Collector so every Snapshot field (series,
// kept span steps, kernel window, expert window and placement, switch
// timeline, calibration, log wording) is what the console would really show.
//
// The run: tiny-hybrid (3 kda + 1 mla layers, 8 experts top-2, EPLB with 4
// redundant slots) starts in TP under the auto policy, calibrates at 2-4 s,
// retracts one request at 9 s, and switches TP -> EP at 18.35 s when the
// batch passes T_h 64; the batch grows to 90 and a queue builds from 24 s.
// Spans ("full" trace) for the last 6 steps, kernel stats, expert load and
// steps every 100 ms, occupancy every 500 ms, requests every 2 s.
//
// Nothing reads a clock: the Collector's clock is a fixed time point that
// the test moves to make a connection live (0.4 s after the last
// heartbeat) or lost (12.5 s after it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "console/collect/collector.h"
#include "console/collect/compare.h"
#include "console/draw/browser.h"
#include "console/input/replay_commands.h"

namespace sy::console::testing {

inline constexpr int64_t kSnapS = 1'000'000;
inline constexpr int kSnapSeconds = 30;
inline constexpr int kSnapDevices = 4;
inline constexpr int kSnapLayers = 4;
inline constexpr int kSnapExperts = 8;
inline constexpr int64_t kSnapSwitchUs = 18'350'000;  // TP -> EP
inline constexpr const char* kSnapRun = "run-snap";
inline constexpr const char* kSnapDb = "/home/op/.local/share/switchyard/runs.db";

// One item of the stream: an engine message, or (console_line non-empty) a
// line the live console itself logs at that point (a typed command); replay
// skips those, as a stored run holds only the engine's messages.
struct SnapItem {
  telemetry::Message msg;
  std::string console_line;
};

// Builds the stream; per-topic sequence numbers have no gaps.
class SnapStream {
 public:
  std::vector<SnapItem> Build() {
    Meta(0, "TP");
    Event(0, "lifecycle", "start", "", "serving tiny-hybrid on 4 devices", {});
    for (int sec = 0; sec < kSnapSeconds; ++sec) {
      Beat(sec);
      if (sec > 0 && sec % 5 == 0) Meta(sec * kSnapS, sec * kSnapS < kSnapSwitchUs ? "TP" : "EP");
      for (int i = 0; i < 10; ++i) StepAt(sec, i);
      Scripted(sec);
    }
    return std::move(items_);
  }

  static int BatchAt(int sec, int i) { return std::min(90, 12 + 3 * sec) + i % 3 - 1; }

 private:
  template <typename M>
  void Emit(M m, int64_t t_us) {
    m.env.run = kSnapRun;
    m.env.t_us = t_us;
    m.env.seq = seq_[std::string(telemetry::TopicOf(telemetry::Message(m)))]++;
    items_.push_back(SnapItem{telemetry::Message(std::move(m)), ""});
  }

  void Meta(int64_t t, const std::string& layout) {
    telemetry::Meta m;
    m.model.preset = "tiny-hybrid";
    m.model.arch = "bailing_hybrid";
    m.model.layers = kSnapLayers;
    m.model.attention = {"kda", "kda", "kda", "mla"};
    m.model.experts = kSnapExperts;
    m.model.top_k = 2;
    m.model.page_size = 16;
    m.model.params = 48'200'000;
    m.model.dtype = "bf16";
    m.devices = kSnapDevices;
    m.layout = layout;
    m.trace_level = "full";
    m.started_unix_ms = 1'767'225'600'000;  // fixed; no view shows wall time
    m.workload = "poisson ramp 10 -> 90 req/s, prompts 96-224, 128 new";
    m.expert_device = {0, 0, 1, 1, 2, 2, 3, 3};
    m.kv_pages_per_device = 256;
    m.state_slots_per_device = 32;
    m.policy = {{"mode", "auto"},
                {"t_high", 64},
                {"t_low", 51.2},
                {"t_low_auto", true},
                {"window", 32},
                {"cooldown", 16},
                {"rollout", "auto"},
                {"layout", layout == "TP" ? "tp" : "ep"},
                {"describe", "auto: TP->EP at batch >= 64, EP->TP below 51.2"}};
    Emit(m, t);
  }

  void Beat(int sec) {
    telemetry::Heartbeat h;
    h.interval_ms = 1000;
    h.state = "running";
    h.step = sec * 10 - 1 < 0 ? 0 : sec * 10 - 1;
    h.sent_total = sec * 60;
    Emit(h, sec * kSnapS);
  }

  void Event(int64_t t, const std::string& kind, const std::string& name, const std::string& phase,
             const std::string& message, nlohmann::json detail) {
    telemetry::Event e;
    e.kind = kind;
    e.name = name;
    e.phase = phase;
    e.message = message;
    e.detail = std::move(detail);
    Emit(e, t);
  }

  // The spans of one step on every device, from its start `t0`: per layer
  // attention, router, the MoE dispatch (all-to-all in EP, gather in TP)
  // partly hidden under the shared expert, the experts and the combine.
  static std::vector<telemetry::Span> StepSpans(int64_t t0, bool ep) {
    std::vector<telemetry::Span> out;
    auto add = [&](int d, int layer, const char* name, const char* kind, int64_t at, int64_t dur) {
      telemetry::Span s;
      s.device = d;
      s.layer = layer;
      s.name = name;
      s.kind = kind;
      s.start_us = t0 + at;
      s.dur_us = dur;
      s.tokens = 64;
      out.push_back(s);
    };
    for (int d = 0; d < kSnapDevices; ++d) {
      add(d, -1, "embed", "compute", 0, 120);
      for (int l = 0; l < kSnapLayers; ++l) {
        const int64_t b = 120 + l * 2400;
        add(d, l, l < 3 ? "kda" : "mla", "compute", b, 700 + d * 40);
        add(d, l, "router", "compute", b + 760, 80);
        add(d, l, ep ? "dispatch" : "tp_gather", "comm", b + 840, 300 + d * 60);
        add(d, l, "shared_expert", "compute", b + 840, 250);
        add(d, l, "expert_ffn", "compute", b + 1200 + d * 60, 700 + (d == 2 ? 200 : 0));
        add(d, l, ep ? "combine" : "tp_allreduce", "comm", b + 1960 + d * 60, 260);
      }
      add(d, -1, "lm_head", "compute", 120 + kSnapLayers * 2400, 300);
    }
    return out;
  }

  void StepAt(int sec, int i) {
    const int64_t t = sec * kSnapS + i * 100'000;
    const bool ep = t >= kSnapSwitchUs;
    const int batch = BatchAt(sec, i);
    const int64_t step_no = sec * 10 + i;
    telemetry::Step st;
    st.step = step_no;
    st.start_us = t;
    st.dur_us = ep ? 11'000 + 90 * batch : 8'000 + 150 * batch;
    st.prefill_tokens = i % 4 == 0 ? 128 + 32 * (sec % 3) : 0;
    st.decode_tokens = batch;
    st.batch_requests = batch;
    st.running = batch;
    st.waiting = sec >= 24 ? sec - 23 : 0;
    if (i % 5 == 0) ++finished_;
    generated_ += batch;
    st.finished_total = finished_;
    st.generated_total = generated_;
    Emit(st, t);

    const std::vector<telemetry::Span> spans = StepSpans(t, ep);
    // Kernel stats: the same spans summed per (device, name).
    std::map<std::pair<int, std::string>, telemetry::KernelStat> agg;
    for (const telemetry::Span& s : spans) {
      telemetry::KernelStat& k = agg[{s.device, s.name}];
      k.device = s.device;
      k.name = s.name;
      k.kind = s.kind;
      ++k.count;
      k.total_us += s.dur_us;
      k.max_us = std::max(k.max_us, s.dur_us);
    }
    telemetry::KernelStats ks;
    ks.step = step_no;
    for (auto& [key, k] : agg) ks.kernels.push_back(k);
    Emit(ks, t + st.dur_us);
    if (step_no >= kSnapSeconds * 10 - 6) {
      telemetry::Spans sp;
      sp.step = step_no;
      sp.spans = spans;
      Emit(sp, t + st.dur_us);
    }
    Experts(t + st.dur_us, step_no, batch * 2 + st.prefill_tokens * 2);
    if (i % 5 == 4) Occupancy(t + st.dur_us, step_no, batch, st.waiting);
    if (i % 5 == 0) Done(t + st.dur_us, ep);
    if ((sec % 2 == 1 && i == 5) || step_no == kSnapSeconds * 10 - 1) {
      Requests(t + st.dur_us, step_no, batch, st.waiting);
    }
  }

  void Experts(int64_t t, int64_t step, int64_t tokens) {
    telemetry::ExpertLoad e;
    e.step = step;
    e.expert_device = {0, 0, 1, 1, 2, 2, 3, 3};
    e.slot_device = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
    for (int l = 0; l < kSnapLayers; ++l) {
      const int hot = (l * 3 + 1) % kSnapExperts;
      std::vector<int64_t> w(kSnapExperts);
      int64_t wsum = 0;
      for (int x = 0; x < kSnapExperts; ++x) wsum += w[x] = x == hot ? 6 : 1 + (x + l) % 3;
      std::vector<int64_t> counts(kSnapExperts);
      int64_t given = 0;
      for (int x = 0; x < kSnapExperts; ++x) given += counts[x] = tokens * w[x] / wsum;
      counts[0] += tokens - given;
      // Slots device-major: each device its two experts and one replica.
      const int spare[kSnapDevices] = {hot, (hot + 1) % 8, (hot + 4) % 8, (hot + 5) % 8};
      std::vector<int> p2l;
      for (int d = 0; d < kSnapDevices; ++d) {
        p2l.insert(p2l.end(), {2 * d, 2 * d + 1, spare[d]});
      }
      std::vector<double> load(kSnapDevices);
      for (size_t s = 0; s < p2l.size(); ++s) {
        const auto replicas = std::count(p2l.begin(), p2l.end(), p2l[s]);
        load[e.slot_device[s]] += static_cast<double>(counts[p2l[s]]) / replicas;
      }
      double mean = 0;
      for (double x : load) mean += x / kSnapDevices;
      e.balancedness.push_back(mean / *std::max_element(load.begin(), load.end()));
      e.counts.push_back(std::move(counts));
      e.phy2log.push_back(std::move(p2l));
    }
    Emit(e, t);
  }

  void Occupancy(int64_t t, int64_t step, int batch, int waiting) {
    constexpr int64_t kPage = 20480, kSlot = 448512;
    telemetry::Occupancy o;
    o.step = step;
    o.running = batch;
    o.waiting = waiting;
    for (int d = 0; d < kSnapDevices; ++d) {
      telemetry::DeviceOccupancy x;
      x.device = d;
      x.running = batch / kSnapDevices + (d < batch % kSnapDevices ? 1 : 0);
      x.kv_pages_total = 256;
      x.kv_pages_used = std::min(256, 24 + 2 * batch + 9 * d);
      x.state_slots_total = 32;
      x.state_slots_used = std::min(32, x.running + 1);
      x.kv_bytes_used = x.kv_pages_used * kPage;
      x.kv_bytes_total = x.kv_pages_total * kPage;
      x.state_bytes_used = x.state_slots_used * kSlot;
      x.state_bytes_total = x.state_slots_total * kSlot;
      x.cache_tokens = 1200 + 160 * d;
      x.cache_nodes = 30 + 3 * d;
      x.cache_slots = 1;
      x.cache_hit_rate = 0.25 + 0.1 * d;
      x.cache_evicted_pages = 12 * d;
      o.devices.push_back(x);
    }
    Emit(o, t);
  }

  void Done(int64_t t, bool ep) {
    const int64_t id = ++done_id_;
    telemetry::RequestDone r;
    r.id = id;
    r.device = static_cast<int>(id % kSnapDevices);
    r.prompt_tokens = 96 + static_cast<int>(id % 5) * 32;
    r.output_tokens = id == 45 ? 0 : 16 + static_cast<int>(id * 37 % 113);
    r.ttft_us = id == 45 ? 0 : (ep ? 21'000 : 30'000) + (id % 7) * 9'000;
    r.tpot_us = (ep ? 7'400 : 9'100) + (id % 4) * 350;
    r.e2e_us = r.ttft_us + r.tpot_us * std::max(0, r.output_tokens - 1);
    if (id == 45) r.e2e_us = 2'400'000;
    r.arrival_us = t - r.e2e_us;
    r.finish = id == 45 ? "cancelled" : r.output_tokens == 128 ? "length" : "eos";
    r.cached_tokens = id % 3 == 0 ? 64 : 0;
    r.preemptions = id == 19 ? 1 : 0;
    Emit(r, t);
  }

  void Requests(int64_t t, int64_t step, int batch, int waiting) {
    telemetry::Requests q;
    q.step = step;
    for (int k = 0; k < batch; ++k) {
      telemetry::RequestProgress p;
      p.id = 1000 + step / 2 + k;
      p.device = k % kSnapDevices;
      p.prompt_tokens = 96 + (k % 5) * 32;
      p.max_new_tokens = 128;
      p.computed = k < 3 ? p.prompt_tokens / (k + 2) : p.prompt_tokens + (k * 29) % 120;
      p.generated = k < 3 ? 0 : 1 + (k * 29) % 120;
      p.cached_tokens = k % 3 == 0 ? 64 : 0;
      p.preemptions = k == 7 ? 1 : 0;
      p.arrival_us = t - (batch - k) * 120'000;
      p.first_token_us = p.generated > 0 ? p.arrival_us + 40'000 : -1;
      q.running.push_back(p);
    }
    for (int k = 0; k < waiting; ++k) {
      telemetry::RequestProgress p;
      p.id = 2000 + step / 2 + k;
      p.prompt_tokens = 128;
      p.max_new_tokens = 128;
      p.generated = k == 0 ? 12 : 0;  // a retracted one waits with its tokens
      p.preemptions = k == 0 ? 1 : 0;
      p.arrival_us = t - (waiting - k) * 90'000;
      q.waiting.push_back(p);
    }
    q.running_total = batch;
    q.waiting_total = waiting;
    Emit(q, t);
  }

  // The events of second `sec`, after its steps.
  void Scripted(int sec) {
    const int64_t t = sec * kSnapS;
    if (sec == 2) {
      Event(t + 10'000, "calibrate", "calibrate", "started", "",
            {{"batches", {1, 16, 64, 96}}, {"steps", 8}, {"apply", true}});
    }
    if (sec == 4) {
      Event(t + 200'000, "calibrate", "calibrate", "done", "",
            {{"points",
              {{{"batch", 1}, {"tp_ms", 6.1}, {"ep_ms", 9.4}, {"faster", "TP"}},
               {{"batch", 16}, {"tp_ms", 8.9}, {"ep_ms", 11.2}, {"faster", "TP"}},
               {{"batch", 64}, {"tp_ms", 17.7}, {"ep_ms", 16.9}, {"faster", "EP"}},
               {{"batch", 96}, {"tp_ms", 22.3}, {"ep_ms", 19.7}, {"faster", "EP"}}}},
             {"kind", "crossover"},
             {"crossover_batch", 58.3},
             {"t_high", 64},
             {"t_low", 51.2},
             {"applied", true},
             {"summary", "EP faster above batch 58.3"},
             {"table",
              "  batch  TP ms  EP ms\n      1  6.100  9.400\n     16  8.900 11.200\n"
              "     64 17.700 16.900\n     96 22.300 19.700\nEP faster above batch 58.3\n"}});
    }
    if (sec == 9) {
      Event(t + 300'000, "scheduler", "retract", "",
            "request 19 retracted: KV pool full on device 2", {{"id", 19}, {"device", 2}});
    }
    if (sec == 12) {
      items_.push_back(SnapItem{telemetry::Message(telemetry::Heartbeat{}), "> :trace full"});
      Event(t + 400'000, "command", "trace", "done", "trace level full", {{"level", "full"}});
    }
    if (sec == 18) {
      Event(kSnapSwitchUs - 50'000, "policy", "decision", "",
            "batch 66 >= T_h 64: switch to EP now",
            {{"action", "switch_to_ep"},
             {"why", "above_high"},
             {"step", 183},
             {"layout", "tp"},
             {"batch", 66},
             {"mean", 63.5},
             {"window", 32},
             {"t_high", 64},
             {"t_low", 51.2},
             {"cooldown_left", 0},
             {"rollout", false}});
      Event(kSnapSwitchUs, "switch", "switch", "done", "",
            {{"from", "TP"},
             {"to", "EP"},
             {"layers", 4},
             {"weights_ms", 10.1},
             {"permute_ms", 1.2},
             {"exchange_ms", 6.0},
             {"place_ms", 2.9},
             {"state_ms", 1.5},
             {"kv_pages", 12},
             {"state_slots", 3},
             {"state_bytes", 98304},
             {"other_ms", 2.4},
             {"rollback_ms", 0.0},
             {"total_ms", 12.5},
             {"bytes", 36 << 20},
             {"gbps", 7.9},
             {"rolled_back", false},
             {"why", "policy: batch 66 >= T_h 64"},
             {"rehome", {{"requests", 66}, {"moved", 12}, {"moved_pages", 41}, {"fits", true}}}});
    }
    if (sec == 25) {
      Event(t + 600'000, "warning", "kv_pressure", "", "device 3 KV pool above 90%",
            {{"device", 3}});
    }
  }

  std::vector<SnapItem> items_;
  std::map<std::string, uint64_t> seq_;
  int64_t finished_ = 0;
  int64_t generated_ = 0;
  int64_t done_id_ = 0;
};

// The Snapshot of each state. `live` is the console connected to the
// engine, `replay` a stored run played to its end and paused.
enum class SnapState { kEmpty, kLive, kLost, kReplay };

inline Snapshot SnapStateSnapshot(SnapState state) {
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  auto now = t0;
  CollectorOptions o;
  o.clock = [&now] { return now; };
  Collector c(o);
  c.SetStoreCounters(StoreCounters{0, 0, "", kSnapDb});
  if (state == SnapState::kEmpty) return c.TakeSnapshot();
  int64_t written = 0;
  for (const SnapItem& item : SnapStream().Build()) {
    if (!item.console_line.empty()) {
      if (state != SnapState::kReplay) c.AddLog(LogLevel::kCommand, item.console_line);
      continue;
    }
    c.Consume(item.msg);
    ++written;
  }
  if (state == SnapState::kReplay) {
    c.SetReplayClock(ReplayClock{29.9, 30.0, 2, false});
  } else {
    c.SetStoreCounters(StoreCounters{written, 0, "", kSnapDb});
  }
  // The last heartbeat came at t0 (every message was consumed then).
  now = t0 + std::chrono::milliseconds(state == SnapState::kLost ? 12'500 : 400);
  return c.TakeSnapshot();
}

// The `:compare` of the run's TP window (6-16 s) with its EP window (19-29 s).
inline Comparison SnapComparison() {
  const std::vector<SnapItem> items = SnapStream().Build();
  auto window = [&](int64_t from, int64_t to, const char* layout) {
    WindowAccumulator acc(
        std::string(kSnapRun) + " " + FormatPosition(from) + "-" + FormatPosition(to), from, to);
    acc.SetInitialLayout(layout);
    for (const SnapItem& item : items) {
      if (item.console_line.empty()) acc.Consume(item.msg);
    }
    return acc.Finish();
  };
  return Compare(window(6 * kSnapS, 16 * kSnapS, "TP"), window(19 * kSnapS, 29 * kSnapS, "EP"));
}

// The run browser over a store of five runs, the second selected.
inline BrowserState SnapBrowser() {
  BrowserState b;
  b.path = kSnapDb;
  b.file_bytes = 734'003'200;
  b.rows = {
      {"run-snap", "2026-01-01 00:00", "0m30s", "tiny-hybrid", 4, "TP>EP", 1, 0, 300, 31'200,
       "ended"},
      {"run-ep-bench", "2025-12-31 18:42", "12m04s", "tiny-moe", 4, "EP", 0, 3, 72'400, 4'100'000,
       "ended"},
      {"run-tp-sweep", "2025-12-31 16:05", "45m10s", "mini-moe-bf16-long-context", 8, "TP>EP>TP", 6,
       2, 270'000, 17'000'000, "abnormal"},
      {"run-smoke", "2025-12-30 09:12", "0m08s", "tiny-moe", 2, "-", 0, 0, 80, 900, "interrupted"},
      {"run-live", "2026-01-01 00:31", "2m00s", "tiny-hybrid", 4, "EP", 0, 0, 1'200, 125'000,
       "live"},
  };
  b.selected = 1;
  return b;
}

}  // namespace sy::console::testing
