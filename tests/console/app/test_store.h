// Helpers for console app tests: temp folders and a store file holding one
// synthetic run, written through the real store::Writer.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "store/store.h"
#include "telemetry/protocol.h"

namespace sy::console::testing {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("sy_console_" + std::to_string(getpid()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct SyntheticRun {
  std::string id = "run-test";
  int seconds = 30;
  int steps_per_second = 10;
  int requests_per_second = 2;
  int spans_per_step = 4;  // 2 devices x (compute, comm)
};

inline telemetry::Envelope Env(const std::string& run, uint64_t seq, int64_t t_us) {
  telemetry::Envelope e;
  e.run = run;
  e.seq = seq;
  e.t_us = t_us;
  return e;
}

// Writes the run and closes the writer. Step i happens at t = i * 100 ms.
inline void WriteSyntheticRun(const std::string& path, const SyntheticRun& r = {}) {
  auto writer = store::Writer::Open(path);
  if (!writer.ok()) throw std::runtime_error(writer.status().ToString());
  telemetry::Meta meta;
  meta.env = Env(r.id, 0, 0);
  meta.model.preset = "tiny-moe";
  meta.model.layers = 2;
  meta.model.attention = {"mha", "mha"};
  meta.model.experts = 4;
  meta.model.page_size = 16;
  meta.devices = 2;
  meta.layout = "EP";
  meta.trace_level = "full";
  meta.started_unix_ms = 1'700'000'000'000;
  meta.expert_device = {0, 0, 1, 1};
  meta.kv_pages_per_device = 64;
  (*writer)->Enqueue(meta);
  const int steps = r.seconds * r.steps_per_second;
  const int64_t dt = 1'000'000 / r.steps_per_second;
  uint64_t req_seq = 0;
  for (int i = 0; i < steps; ++i) {
    const int64_t t = i * dt;
    telemetry::Step s;
    s.env = Env(r.id, i, t);
    s.step = i;
    s.start_us = t;
    s.dur_us = dt / 2;
    s.prefill_tokens = 100;
    s.decode_tokens = 10;
    s.batch_requests = 4;
    s.running = 4;
    s.waiting = 1;
    (*writer)->Enqueue(s);
    telemetry::Spans sp;
    sp.env = Env(r.id, i, t);
    sp.step = i;
    for (int d = 0; d < 2; ++d) {
      telemetry::Span a;
      a.device = d;
      a.name = "moe_ffn";
      a.kind = "compute";
      a.start_us = t;
      a.dur_us = 100;
      telemetry::Span b = a;
      b.name = "all_to_all";
      b.kind = "comm";
      b.start_us = t + 100;
      sp.spans.push_back(a);
      sp.spans.push_back(b);
    }
    (*writer)->Enqueue(sp);
    telemetry::KernelStats ks;
    ks.env = Env(r.id, i, t);
    ks.step = i;
    for (int d = 0; d < 2; ++d) {
      ks.kernels.push_back({d, "moe_ffn", "compute", 1, 100, 100, 0, 0});
      ks.kernels.push_back({d, "all_to_all", "comm", 1, 100, 100, 0, 0});
    }
    (*writer)->Enqueue(ks);
    telemetry::ExpertLoad e;
    e.env = Env(r.id, i, t);
    e.step = i;
    e.counts = {{1, 2, 3, 4}, {4, 3, 2, 1}};
    e.expert_device = meta.expert_device;
    (*writer)->Enqueue(e);
    if (i % (r.steps_per_second / r.requests_per_second) == 0) {
      telemetry::RequestDone d;
      d.env = Env(r.id, req_seq++, t);
      d.id = i;
      d.output_tokens = 10;
      d.ttft_us = 1000 + i;
      d.tpot_us = 100;
      d.finish = "eos";
      (*writer)->Enqueue(d);
    }
  }
  telemetry::Heartbeat hb;
  hb.env = Env(r.id, 0, steps * dt);
  hb.interval_ms = 500;
  hb.state = "running";
  (*writer)->Enqueue(hb);
  (*writer)->Flush();
}

}  // namespace sy::console::testing
