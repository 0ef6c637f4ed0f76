// A stored run with events, for replay navigation and compare tests: 60 s,
// 10 steps a second numbered from 1000, a TP switch at 30 s that halves the
// MoE time and doubles decode throughput, written through store::Writer.
//
//   t = 10 s   policy decision        (skipped by event navigation)
//   t = 15 s   command "switch tp"    (recorded by the console, ok), and the
//              engine's command mirrors received/done (skipped)
//   t = 20 s   rebalance layer        (skipped)
//   t = 30 s   switch done EP -> TP, then a Meta with layout TP
//   t = 45 s   rebalance done, and command "rebalance" recorded by the
//              console at the same engine time
//   t = 60 s   heartbeat (the run's duration)
//
// Before 30 s a step decodes 10 tokens at batch 4 in 50 ms, with kernels
// expert_ffn 300 us + attention 100 us (MoE share 75%); after, 20 tokens at
// batch 8 in 40 ms, expert_ffn 100 us + attention 100 us (50%). A request
// finishes every second step of ten: TTFT 2 ms / TPOT 100 us before, 1 ms /
// 80 us after.
#pragma once

#include <map>
#include <string>

#include "tests/console/app/test_store.h"

namespace sy::console::testing {

inline constexpr int64_t kFirstStep = 1000;

inline void WriteEventRun(const std::string& path, const std::string& id = "run-ev") {
  auto writer = store::Writer::Open(path);
  if (!writer.ok()) throw std::runtime_error(writer.status().ToString());
  store::Writer& w = **writer;
  // One sequence per topic, as an engine numbers its messages.
  std::map<std::string, uint64_t> seqs;
  auto seq = [&](const char* topic) { return seqs[topic]++; };
  auto meta_at = [&](int64_t t, const std::string& layout) {
    telemetry::Meta meta;
    meta.env = Env(id, seq("meta"), t);
    meta.model.preset = "tiny-moe";
    meta.model.layers = 2;
    meta.model.attention = {"mha", "mha"};
    meta.model.experts = 4;
    meta.model.page_size = 16;
    meta.devices = 2;
    meta.layout = layout;
    meta.trace_level = "summary";
    meta.started_unix_ms = 1'700'000'000'000;
    meta.expert_device = {0, 0, 1, 1};
    meta.kv_pages_per_device = 64;
    w.Enqueue(meta);
  };
  auto event_at = [&](int64_t t, std::string kind, std::string name, std::string phase,
                      std::string message) {
    telemetry::Event e;
    e.env = Env(id, seq("event"), t);
    e.kind = std::move(kind);
    e.name = std::move(name);
    e.phase = std::move(phase);
    e.message = std::move(message);
    w.Enqueue(e);
  };
  meta_at(0, "EP");
  for (int i = 0; i < 600; ++i) {
    const int64_t t = i * 100'000LL;
    const bool after = t >= 30'000'000;
    if (t == 10'000'000) event_at(t, "policy", "decision", "", "batch 4 < T_h 64: stay");
    if (t == 15'000'000) {
      event_at(t, "command", "switch", "received", "switch received");
      event_at(t, "command", "switch", "done", "switch done");
    }
    if (t == 20'000'000) event_at(t, "rebalance", "rebalance", "layer", "layer 0 moved");
    if (t == 30'000'000) {
      event_at(t, "switch", "switch", "done", "EP -> TP in 12 ms");
      meta_at(t, "TP");
    }
    if (t == 45'000'000) event_at(t, "rebalance", "rebalance", "done", "4 experts moved");
    telemetry::Step s;
    s.env = Env(id, seq("step"), t);
    s.step = kFirstStep + i;
    s.start_us = t;
    s.dur_us = after ? 40'000 : 50'000;
    s.decode_tokens = after ? 20 : 10;
    s.batch_requests = after ? 8 : 4;
    s.running = s.batch_requests;
    w.Enqueue(s);
    telemetry::KernelStats ks;
    ks.env = Env(id, seq("kstats"), t);
    ks.step = s.step;
    ks.kernels.push_back(
        {0, "expert_ffn", "compute", 1, after ? 100 : 300, after ? 100 : 300, 0, 0});
    ks.kernels.push_back({0, "attention", "compute", 1, 100, 100, 0, 0});
    w.Enqueue(ks);
    if (i % 10 == 5) {
      telemetry::RequestDone d;
      d.env = Env(id, seq("request"), t);
      d.id = i;
      d.output_tokens = 10;
      d.ttft_us = after ? 1000 : 2000;
      d.tpot_us = after ? 80 : 100;
      d.finish = "eos";
      w.Enqueue(d);
    }
  }
  telemetry::Heartbeat hb;
  hb.env = Env(id, seq("heartbeat"), 60'000'000);
  hb.interval_ms = 500;
  hb.state = "running";
  w.Enqueue(hb);
  w.Flush();
  store::CommandRecord c;
  c.run = id;
  c.t_us = 15'000'000;
  c.unix_ms = 1'700'000'015'000;
  c.text = "switch tp";
  c.request = R"({"cmd":"switch","args":{"to":"tp"}})";
  c.ok = true;
  c.reply = R"({"ok":true})";
  w.RecordCommand(c);
  c.t_us = 45'000'000;
  c.unix_ms = 1'700'000'045'000;
  c.text = "rebalance";
  c.request = R"({"cmd":"rebalance","args":{}})";
  w.RecordCommand(c);
  w.Flush();
}

}  // namespace sy::console::testing
