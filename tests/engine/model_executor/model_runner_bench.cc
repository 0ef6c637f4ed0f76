// Decode throughput of ModelRunner: tokens/s at a given batch size, preset and
// device count. Not a test (no assertions about speed); scripts/bench runs it.
//
//   engine_model_runner_bench [preset=tiny] [devices=4] [batch=1,64] [steps=64] [prompt=32]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "engine/model_executor/model_runner.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {
namespace {

// CPU seconds of the whole process (all device threads): steadier than wall
// time on a shared box.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int Bench(const std::string& preset, int devices, int batch, int steps, int prompt) {
  Result<ModelConfig> cfg = PresetConfig(preset);
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().ToString().c_str());
    return 1;
  }
  const int ps = 16;
  const int pages_per_seq = KvPool::PagesFor(prompt + steps + 1, ps);
  const int per_dev = (batch + devices - 1) / devices * pages_per_seq + 1;
  auto runner = ModelRunner::Create(
      *cfg, {.devices = devices, .seed = 1, .kv_pages_per_device = per_dev, .page_size = ps});
  if (!runner.ok()) {
    std::fprintf(stderr, "%s\n", runner.status().ToString().c_str());
    return 1;
  }
  ModelRunner& r = **runner;
  BatchInput b;
  for (int i = 0; i < batch; ++i) {
    SeqInput s;
    s.request_id = i;
    s.device = i % devices;
    for (int t = 0; t < prompt; ++t) s.tokens.push_back((t * 31 + i * 7) % 256);
    if (!r.kv_pool(s.device).Allocate(pages_per_seq, &s.pages).ok()) return 1;
    b.seqs.push_back(std::move(s));
  }
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  StepOutput out = r.Step(b, TraceLevel::kOff).value();
  const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int i = 0; i < batch; ++i) {
    b.seqs[i].start_pos = prompt;
    b.seqs[i].tokens = {out.outputs[i].next_token};
  }
  t0 = Clock::now();
  const double cpu0 = CpuSeconds();
  for (int s = 0; s < steps; ++s) {
    out = r.Step(b, TraceLevel::kOff).value();
    for (int i = 0; i < batch; ++i) {
      b.seqs[i].start_pos += 1;
      b.seqs[i].tokens[0] = out.outputs[i].next_token;
    }
  }
  const double decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double decode_cpu = CpuSeconds() - cpu0;
  if (std::getenv("SY_BENCH_KERNELS")) {
    // One traced decode step, summarised per (device, kernel).
    out = r.Step(b, TraceLevel::kFull).value();
    for (const auto& k : Summarize(out.spans)) {
      std::printf("  dev%d %-14s n=%-3d total_us=%-6lld flops=%lld bytes=%lld\n", k.device,
                  k.name.c_str(), k.count, static_cast<long long>(k.total_us),
                  static_cast<long long>(k.flops), static_cast<long long>(k.bytes));
    }
  }
  std::printf(
      "preset=%s devices=%d batch=%d prompt=%d prefill_tok_s=%.0f decode_steps=%d "
      "decode_tok_s=%.0f step_ms=%.3f cpu_ms_per_step=%.3f\n",
      preset.c_str(), devices, batch, prompt, batch * prompt / prefill_s, steps,
      batch * steps / decode_s, 1e3 * decode_s / steps, 1e3 * decode_cpu / steps);
  return 0;
}

}  // namespace
}  // namespace sy::engine

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "tiny";
  const int devices = argc > 2 ? std::atoi(argv[2]) : 4;
  const std::string batches = argc > 3 ? argv[3] : "1,64";
  const int steps = argc > 4 ? std::atoi(argv[4]) : 64;
  const int prompt = argc > 5 ? std::atoi(argv[5]) : 32;
  std::stringstream ss(batches);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (int rc = sy::engine::Bench(preset, devices, std::atoi(item.c_str()), steps, prompt))
      return rc;
  }
  return 0;
}
