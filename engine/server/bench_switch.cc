// File: engine/server/bench_switch.cc
//
// Bench (f): the TP <-> EP switch. For the bench preset and a larger one, a
// fresh runner switches EP -> TP -> EP `switch_rounds` times; reported: the
// reshard's effective bandwidth (payload bytes sent between devices / the
// weights phase), the whole pause, and this machine's memcpy bandwidth
// measured in the same run on a buffer as large as one device's experts, so
// the reshard reads as a fraction of what the memory system can do.
// Then (g): the calibration curves of the bench preset (MeasureLayouts).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "engine/model_executor/model_runner.h"
#include "engine/server/bench.h"
#include "engine/server/calibrate_run.h"

namespace sy::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Best of several copies of `bytes` between two buffers, GB/s.
double MemcpyGbps(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 1 << 20);
  std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
  std::memset(a.get(), 1, bytes);
  std::memset(b.get(), 2, bytes);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.get(), a.get(), bytes);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
    std::swap(a, b);
  }
  return best;
}

}  // namespace

Result<SwitchBenchResult> BenchSwitch(const ModelConfig& config, const BenchOptions& o) {
  ModelRunnerOptions ro{.devices = o.devices, .seed = o.seed, .kv_pages_per_device = 16};
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, ro));
  SwitchBenchResult r{.model = config.name, .devices = o.devices};
  const int moe_layers = config.layers - std::min(config.first_k_dense_replace, config.layers);
  r.weight_bytes = static_cast<int64_t>(moe_layers) * config.experts * 3 * config.hidden *
                   config.expert_inter * static_cast<int64_t>(sizeof(float));
  r.memcpy_gbps = MemcpyGbps(r.weight_bytes / o.devices);
  std::vector<double> gbps, pause;
  for (int i = 0; i < o.switch_rounds; ++i) {
    for (ParallelMode m : {ParallelMode::kTP, ParallelMode::kEP}) {
      ASSIGN_OR_RETURN(SwitchStats s, runner->SwitchParallelism(m));
      gbps.push_back(s.gbps);
      pause.push_back(s.total_ms);
      r.bytes_per_switch = s.bytes_moved;
    }
  }
  std::sort(gbps.begin(), gbps.end());
  std::sort(pause.begin(), pause.end());
  r.switches = static_cast<int>(gbps.size());
  r.reshard_gbps = gbps[gbps.size() / 2];
  r.pause_ms = pause[pause.size() / 2];
  r.pause_max_ms = pause.back();
  r.reshard_over_memcpy = r.memcpy_gbps > 0 ? r.reshard_gbps / r.memcpy_gbps : 0;
  return r;
}

Result<Calibration> BenchCalibrate(const ModelConfig& config, const BenchOptions& o) {
  ModelRunnerOptions ro{.devices = o.devices, .seed = o.seed};
  ASSIGN_OR_RETURN(std::vector<LatencyPoint> pts,
                   MeasureLayouts(config, ro, {.batches = o.calibrate_batches, .steps = 8}));
  return FitCrossover(std::move(pts));
}

}  // namespace sy::engine
