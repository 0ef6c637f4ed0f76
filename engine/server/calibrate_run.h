// File: engine/server/calibrate_run.h
//
// Calibration by measurement (seed 003 W1): the decode step latency of both
// MoE layouts at several batch sizes, on a ModelRunner of its own with the
// engine's model, devices and weights, then FitCrossover
// (engine/parallelism/calibrate.h) for the crossover batch and thresholds.
// The runner is the engine's kind: the CPU runner, timed on the wall clock,
// or under `--backend sim` a SimRunner on a VirtualClock of its own, whose
// steps are priced by the cost model (so the thresholds are the simulated
// cluster's, not this machine's, and measuring takes milliseconds).
//
//   ASSIGN_OR_RETURN(std::vector<LatencyPoint> pts, MeasureLayouts(config, runner_options, {}));
//   ASSIGN_OR_RETURN(Calibration c, FitCrossover(pts));
//
//   auto run = std::make_unique<CalibrationRun>(SimLayoutBench(config, sim), config,
//                                               runner_options, CalibrateRunOptions{});
//   ... later, on the same thread: if (run->done()) Publish(run->result());
//
// Each batch size B: B requests of prompt_len tokens are prefilled, `warmup`
// decode steps run, then `steps` decode steps are timed in EP, the runner
// switches to TP (SwitchParallelism), `steps` more are timed, and it switches
// back. The same requests and positions serve both layouts, so the two
// latencies differ only by the layout. prompt_len matters on the sim: TP
// reads each KV head on P / kv_heads devices, so longer contexts favour EP.
//
// Thread-safety: MeasureLayouts is a pure function of its arguments (it owns
// its runner). CalibrationRun runs it on its own thread; construct, poll and
// destroy it on one thread. A CPU measurement competes for CPU with whatever
// else runs (serving, on a live engine): the figures say what this machine
// does under that load.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/status.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/parallelism/calibrate.h"
#include "engine/sim/sim_runner.h"

namespace sy::engine {

struct CalibrateRunOptions {
  std::vector<int> batches = {1, 4, 16, 64};
  int steps = 8;   // timed decode steps per layout and batch
  int warmup = 2;  // untimed decode steps first
  int prompt_len = 16;
};

// Tokens each measured request decodes: the warmup, both layouts' timed
// steps and a margin, so no request finishes while it is being timed.
int CalibrateDecodeTokens(const CalibrateRunOptions& o);
// MeasureLayouts' argument checks, for a caller that refuses a bad request
// before measuring in the background: INVALID_ARGUMENT for fewer than 2
// batches, a batch outside [1, 4096], steps outside [1, 1000] or a prompt
// that with CalibrateDecodeTokens does not fit in `max_seq`.
Status ValidateCalibrateOptions(const CalibrateRunOptions& o, int max_seq);

// What a calibration measures: how to build its runner and the clock its
// steps are timed on. Copyable; each copy's runners share one clock.
struct LayoutBench {
  // Builds the runner for `options` (MeasureLayouts sizes its pools).
  std::function<Result<std::unique_ptr<ModelRunner>>(const ModelRunnerOptions&)> create;
  std::function<int64_t()> now_us;
  bool simulated = false;  // the figures are the cost model's, not this machine's
};

// The CPU runner on the wall clock.
LayoutBench CpuLayoutBench(const ModelConfig& config);
// A SimRunner priced as `sim` says, on a VirtualClock of its own (sim.clock
// is replaced), so measuring never moves a serving engine's time.
// `config` must be SimModelConfig(sim.model, config.max_seq).
LayoutBench SimLayoutBench(const ModelConfig& config, SimOptions sim);

// INVALID_ARGUMENT for fewer than 2 batches, a batch < 1, steps < 1 or a
// prompt that does not fit; FAILED_PRECONDITION when the model cannot switch
// to TP (the runner's reason).
Result<std::vector<LatencyPoint>> MeasureLayouts(const LayoutBench& bench,
                                                 const ModelConfig& config,
                                                 ModelRunnerOptions runner_options,
                                                 const CalibrateRunOptions& options);
// The CPU runner's (CpuLayoutBench(config)).
Result<std::vector<LatencyPoint>> MeasureLayouts(const ModelConfig& config,
                                                 ModelRunnerOptions runner_options,
                                                 const CalibrateRunOptions& options);

// `moe-engine calibrate [--model M] [--devices P] [--batches 1,4,16,64]
// [--steps N] [--prompt-len L] [--backend sim --hardware H ...]`: the
// measurement and the fit, printed (calibrate_cli.cc).
// Exit 0, 1 (runtime), 2 (usage).
int CalibrateMain(int argc, char** argv);

class CalibrationRun {
 public:
  // Starts measuring at once; `runner_options.checkpoint` must outlive this.
  CalibrationRun(LayoutBench bench, ModelConfig config, ModelRunnerOptions runner_options,
                 CalibrateRunOptions options);
  ~CalibrationRun();  // waits for the measurement to end
  CalibrationRun(const CalibrationRun&) = delete;
  CalibrationRun& operator=(const CalibrationRun&) = delete;

  bool done() const { return done_.load(std::memory_order_acquire); }
  // The fit, or why there is none. REQUIRES: done().
  const Result<Calibration>& result() const { return result_; }

 private:
  Result<Calibration> result_ = Internal("calibration still running");
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace sy::engine
