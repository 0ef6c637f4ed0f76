// File: engine/server/bench_switch.cc
//
// Bench (f): the TP <-> EP switch. For the bench preset and a larger one, a
// fresh runner switches EP -> TP -> EP `switch_rounds` times; reported: the
// reshard's effective bandwidth (payload bytes sent between devices / the
// weights phase), the whole pause, and this machine's memcpy bandwidth
// measured in the same run on a buffer as large as one device's experts, so
// the reshard reads as a fraction of what the memory system can do. Then
// the same switches with requests in flight (prompts prefilled, so their KV
// pages and state slots move too): the state phase's bytes, time and GB/s.
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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Fills every device with requests (one prefill step of `prompt` tokens
// each, pages and slots from the pools as the scheduler would take them),
// then switches EP -> TP -> EP `rounds` times with them in flight.
Status LoadedSwitches(ModelRunner* runner, const BenchOptions& o, SwitchBenchResult* r) {
  const ModelConfig& c = runner->config();
  const int per_device = 8, prompt = 96;
  BatchInput batch;
  for (int d = 0; d < runner->devices(); ++d) {
    for (int i = 0; i < per_device; ++i) {
      SeqInput s;
      s.request_id = static_cast<int64_t>(d) * per_device + i + 1;
      s.device = d;
      for (int t = 0; t < prompt; ++t) s.tokens.push_back((t * 7 + i * 13 + d) % c.vocab);
      RETURN_IF_ERROR(runner->kv_pool(d).Allocate(
          KvPool::PagesFor(prompt + 1, runner->kv_pool(d).page_size()), &s.pages));
      if (c.linear_layers() > 0) {
        ASSIGN_OR_RETURN(s.state_slot, runner->state_pool(d).Allocate());
      }
      batch.seqs.push_back(std::move(s));
    }
  }
  RETURN_IF_ERROR(runner->Step(batch, TraceLevel::kOff).status());
  std::vector<double> state_ms, state_gbps, pause;
  for (int i = 0; i < o.switch_rounds; ++i) {
    for (ParallelMode m : {ParallelMode::kTP, ParallelMode::kEP}) {
      ASSIGN_OR_RETURN(SwitchStats s, runner->SwitchParallelism(m));
      state_ms.push_back(s.state_ms);
      state_gbps.push_back(s.state_gbps);
      pause.push_back(s.total_ms);
      r->loaded_kv_pages = s.kv_pages;
      r->state_bytes = s.state_bytes;
    }
  }
  r->loaded_requests = static_cast<int>(batch.seqs.size());
  r->state_ms = Median(state_ms);
  r->state_gbps = Median(state_gbps);
  r->loaded_pause_ms = Median(pause);
  return Status::Ok();
}

}  // namespace

Result<SwitchBenchResult> BenchSwitch(const ModelConfig& config, const BenchOptions& o) {
  ModelRunnerOptions ro{.devices = o.devices, .seed = o.seed, .kv_pages_per_device = 64};
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
  RETURN_IF_ERROR(LoadedSwitches(runner.get(), o, &r));
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
