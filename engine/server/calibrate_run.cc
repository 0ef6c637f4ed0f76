#include "engine/server/calibrate_run.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "engine/scheduler/scheduler.h"

namespace sy::engine {

LayoutBench CpuLayoutBench(const ModelConfig& config) {
  return {
      .create = [config](const ModelRunnerOptions& ro) { return ModelRunner::Create(config, ro); },
      .now_us =
          [] {
            return std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                .count();
          },
      .simulated = false};
}

LayoutBench SimLayoutBench(const ModelConfig& config, SimOptions sim) {
  auto clock = std::make_shared<VirtualClock>(0.0);
  sim.clock = clock.get();
  return {.create = [config, sim, clock](
                        const ModelRunnerOptions& ro) { return CreateSimRunner(config, ro, sim); },
          .now_us = [clock] { return clock->NowUs(); },
          .simulated = true};
}

int CalibrateDecodeTokens(const CalibrateRunOptions& o) { return o.warmup + 2 * o.steps + 2; }

Status ValidateCalibrateOptions(const CalibrateRunOptions& o, int max_seq) {
  if (o.batches.size() < 2) return InvalidArgument("calibrate: needs at least 2 batch sizes");
  for (int b : o.batches) {
    if (b < 1 || b > 4096) {
      return InvalidArgument("calibrate: batch sizes must be in [1, 4096], got " +
                             std::to_string(b));
    }
  }
  if (o.steps < 1 || o.steps > 1000 || o.warmup < 0) {
    return InvalidArgument("calibrate: steps must be in [1, 1000]");
  }
  const int decode = CalibrateDecodeTokens(o);
  if (o.prompt_len < 1 || o.prompt_len + decode > max_seq) {
    return InvalidArgument(
        "calibrate: prompt_len + decode steps must fit in max_seq " + std::to_string(max_seq) +
        ": prompt_len must be in [1, " + std::to_string(max_seq - decode) + "] (max_seq " +
        std::to_string(max_seq) + " less " + std::to_string(decode) + " decode steps)");
  }
  return Status::Ok();
}

Result<std::vector<LatencyPoint>> MeasureLayouts(const ModelConfig& config, ModelRunnerOptions ro,
                                                 const CalibrateRunOptions& o) {
  return MeasureLayouts(CpuLayoutBench(config), config, std::move(ro), o);
}

Result<std::vector<LatencyPoint>> MeasureLayouts(const LayoutBench& bench,
                                                 const ModelConfig& config, ModelRunnerOptions ro,
                                                 const CalibrateRunOptions& o) {
  RETURN_IF_ERROR(ValidateCalibrateOptions(o, config.max_seq));
  const int max_new = CalibrateDecodeTokens(o);
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const int per_device = (max_batch + ro.devices - 1) / ro.devices;
  // Room for every request in either layout. A sim's TP layout may hold
  // only split / P of a home's pages (an MLA latent is read whole by every
  // rank: 1 / P), and its pools are bookkeeping only, so it gets the worst
  // case; the CPU runner's pools split heads evenly and allocate storage.
  const int headroom = bench.simulated ? std::max(2, ro.devices) : 2;
  ro.kv_pages_per_device =
      headroom * per_device * KvPool::PagesFor(o.prompt_len + max_new, ro.page_size) + 8;
  ro.state_slots_per_device = std::max(ro.state_slots_per_device, 2 * per_device + 2);
  ASSIGN_OR_RETURN(auto runner, bench.create(ro));
  // Refuse before measuring anything when the shape cannot be TP.
  RETURN_IF_ERROR(runner->SwitchParallelism(ParallelMode::kTP).status());
  RETURN_IF_ERROR(runner->SwitchParallelism(ParallelMode::kEP).status());

  std::vector<LatencyPoint> points;
  for (int batch : o.batches) {
    SchedulerOptions so;
    so.max_running = batch;
    so.max_batch_tokens = batch * o.prompt_len;
    so.admission_reserve_pages = 0;
    so.max_seq = config.max_seq;
    so.vocab = config.vocab;
    so.prefix_cache = false;  // every request computes its own prompt
    std::vector<KvPool*> pools;
    std::vector<StatePool*> states;
    for (int d = 0; d < runner->devices(); ++d) {
      pools.push_back(&runner->kv_pool(d));
      states.push_back(&runner->state_pool(d));
    }
    Scheduler sched(so, std::move(pools), std::move(states));
    for (int i = 0; i < batch; ++i) {
      RequestSpec spec;
      for (int t = 0; t < o.prompt_len; ++t) spec.prompt.push_back(32 + (i * 11 + t * 7) % 90);
      spec.max_new_tokens = max_new;
      spec.ignore_eos = true;
      RETURN_IF_ERROR(sched.Submit(std::move(spec), 0).status());
    }
    const auto step = [&]() -> Status {
      BatchInput b = sched.Plan();
      ASSIGN_OR_RETURN(StepOutput out, runner->Step(b, TraceLevel::kOff));
      return sched.Commit(out, 0).status();
    };
    const auto timed = [&]() -> Result<double> {
      const int64_t t0 = bench.now_us();
      for (int s = 0; s < o.steps; ++s) RETURN_IF_ERROR(step());
      return static_cast<double>(bench.now_us() - t0) / 1e3 / o.steps;
    };
    RETURN_IF_ERROR(step());  // prefill
    for (int s = 0; s < o.warmup; ++s) RETURN_IF_ERROR(step());
    LatencyPoint p{.batch = batch};
    ASSIGN_OR_RETURN(p.ep_ms, timed());
    RETURN_IF_ERROR(runner->SwitchParallelism(ParallelMode::kTP).status());
    ASSIGN_OR_RETURN(p.tp_ms, timed());
    RETURN_IF_ERROR(runner->SwitchParallelism(ParallelMode::kEP).status());
    points.push_back(p);
    // Drain so the pools are free for the next batch size.
    for (int s = 0; s < max_new && !sched.idle(); ++s) RETURN_IF_ERROR(step());
  }
  return points;
}

CalibrationRun::CalibrationRun(LayoutBench bench, ModelConfig config,
                               ModelRunnerOptions runner_options, CalibrateRunOptions options) {
  thread_ = std::thread([this, bench = std::move(bench), config = std::move(config),
                         ro = std::move(runner_options), o = std::move(options)] {
    Result<std::vector<LatencyPoint>> pts = MeasureLayouts(bench, config, ro, o);
    if (pts.ok()) {
      result_ = FitCrossover(std::move(pts).value());
    } else {
      result_ = pts.status();
    }
    done_.store(true, std::memory_order_release);
  });
}

CalibrationRun::~CalibrationRun() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace sy::engine
