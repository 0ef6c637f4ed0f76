// File: engine/server/bench.h
//
// `moe-engine bench`: in-process throughput figures for one preset.
//   (a) decode tokens/s at each batch size: B requests are prefilled, then N
//       decode steps of exactly B tokens are timed (trace off, no sockets).
//   (b) serving tokens/s of the whole Engine (scheduler, model, telemetry) on
//       the same burst workload with tracing off and with tracing full; the
//       Publisher binds an ipc:// endpoint with no subscriber, so encoding and
//       sending every span counts. full/off is the tracing overhead.
//   (c) hybrid models only: prefill tokens/s of one `prefill_len`-token prompt
//       with the linear-attention layers in their chunk-wise form and in the
//       token-by-token recurrence (whole model, one step), and the same two
//       forms of the KDA core alone at Ling3-Tiny's head shape (16 heads of
//       128). chunked/recurrent is the chunk-wise form's speed-up.
//   (d) the agentic workload (workload.h), served closed-loop (each session's
//       next turn is submitted when its previous turn finishes) straight on
//       a Scheduler and ModelRunner, with the prefix cache on and off: the
//       hit rate, requests/s and tokens/s (prompt + output) of each, and
//       on/off. Both runs produce the same tokens (greedy).
//   (e) a live expert rebalance under skewed routing (bench_eplb.cc):
//       balancedness and MoE time per step before and after, the longest
//       pause, bytes moved; without and with redundant experts.
//   (f) the TP <-> EP switch on this preset and a larger one (bench_switch.cc):
//       reshard GB/s against memcpy GB/s measured in the same run, the pause.
//   (g) calibration: decode step latency of both layouts at several batch
//       sizes on this preset, and the fitted crossover.
//
// Thread-safety: RunBench uses its own runners and engines; call from one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/parallelism/calibrate.h"

namespace sy::engine {

struct BenchOptions {
  std::string model = "tiny";
  int devices = 4;
  uint64_t seed = 1;
  std::vector<int> batches = {1, 64};
  int steps = 32;       // timed decode steps per batch size
  int prompt_len = 32;  // prompt tokens of every decode-bench request
  bool trace_compare = true;
  int serve_requests = 64;  // burst size of the tracing comparison
  int serve_output = 32;    // tokens generated per request there
  // Off and full runs alternate this many times; the best of each counts, so
  // a noisy neighbour on a shared machine hurts both sides alike.
  int serve_repeats = 2;
  int prefill_len = 2048;              // (c); 0 skips it
  int agentic_sessions = 4;            // (d); 0 skips it
  int agentic_turns = 8;               // turns per session
  int agentic_output = 32;             // tokens generated per turn
  int eplb_batch = 64;                 // (e); 0 skips it
  int eplb_steps = 32;                 // decode steps measured before and after
  double eplb_skew = 1.5;              // ModelRunnerOptions::router_skew
  int eplb_redundant = 4;              // the second run's redundant experts (0: one run)
  int switch_rounds = 5;               // (f): EP -> TP -> EP round trips per preset; 0 skips (f)
  std::string switch_large = "small";  // (f): the larger preset
  std::vector<int> calibrate_batches = {1, 4, 16, 64};  // (g); empty skips it
};

struct SwitchBenchResult {
  std::string model;
  int devices = 0;
  int switches = 0;
  int64_t weight_bytes = 0;      // routed-expert weights, all devices
  int64_t bytes_per_switch = 0;  // reshard payload sent between devices, all devices
  double reshard_gbps = 0;       // median over switches
  double memcpy_gbps = 0;        // best memcpy of one device's expert bytes
  double reshard_over_memcpy = 0;
  double pause_ms = 0;  // median whole switch
  double pause_max_ms = 0;
  // The same switches with requests in flight (their KV pages and state
  // slots move too): medians over the loaded switches.
  int loaded_requests = 0;
  int loaded_kv_pages = 0;  // used pages moved per switch, all devices
  int64_t state_bytes = 0;  // KV / state bytes sent between devices per switch
  double state_ms = 0;
  double state_gbps = 0;
  double loaded_pause_ms = 0;
};

struct EplbBenchResult {
  int devices = 0;
  int slots = 0;  // physical expert slots per layer (experts + redundant)
  double skew = 0;
  int batch = 0;
  int steps = 0;
  double predicted_before = 0, predicted_after = 0;        // PlanRebalance, window = steps
  double balancedness_before = 0, balancedness_after = 0;  // measured, mean over steps
  double moe_ms_before = 0, moe_ms_after = 0;  // max over devices of expert FFN ms, per step
  double tokens_per_s_before = 0, tokens_per_s_after = 0;
  int layers_moved = 0;
  int experts_moved = 0;
  int64_t bytes_moved = 0;
  double longest_pause_ms = 0;        // the longest layer commit
  double longest_step_before_ms = 0;  // the longest decode step before the rebalance
  double longest_step_during_ms = 0;  // ... while the stager ran beside it
  double rebalance_ms = 0;            // Start to done
  int steps_during = 0;
};

struct CacheBenchResult {
  std::string cache;  // "on" | "off"
  int sessions = 0;
  int requests = 0;
  int64_t prompt_tokens = 0;  // submitted, cached or not
  int64_t output_tokens = 0;
  int64_t hit_tokens = 0;  // prompt tokens reused from the cache
  double hit_rate = 0;     // hit_tokens / prompt_tokens
  double seconds = 0;
  double requests_per_s = 0;
  double tokens_per_s = 0;  // (prompt + output) / seconds
  double ttft_p50_ms = 0;
  // Generated tokens of every turn, [session][turn], to check on == off.
  std::vector<std::vector<std::vector<int32_t>>> outputs;
};

struct PrefillResult {
  std::string what;  // "model" | "kda_core"
  std::string form;  // "chunked" | "recurrent"
  int tokens = 0;
  double seconds = 0;
  double tokens_per_s = 0;
};

struct DecodeResult {
  int batch = 0;
  int steps = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
};

struct ServeResult {
  std::string trace;  // "off" | "full"
  int64_t generated = 0;
  int64_t steps = 0;
  double seconds = 0;
  double tokens_per_s = 0;
  int64_t dropped = 0;
};

struct BenchReport {
  std::string model;
  int devices = 0;
  std::vector<DecodeResult> decode;
  std::vector<ServeResult> serve;  // empty unless trace_compare
  // tokens/s with tracing full divided by tokens/s with tracing off.
  double full_over_off = 0;
  std::vector<PrefillResult> prefill;       // empty unless a hybrid model and prefill_len > 0
  std::vector<CacheBenchResult> agentic;    // on, then off; empty when agentic_sessions == 0
  bool agentic_same_tokens = false;         // on and off generated the same tokens
  std::vector<EplbBenchResult> eplb;        // without, then with redundant experts
  std::vector<SwitchBenchResult> switches;  // (f): bench preset, then the larger one
  std::optional<Calibration> calibration;   // (g)
};

struct ModelConfig;
// (d) on one model; bench_prefix.cc.
Result<CacheBenchResult> BenchAgentic(const ModelConfig& config, const BenchOptions& options,
                                      bool cache);

// (e) on one model; bench_eplb.cc.
Result<EplbBenchResult> BenchEplb(const ModelConfig& config, const BenchOptions& options);
// (f), (g) on one model; bench_switch.cc.
Result<SwitchBenchResult> BenchSwitch(const ModelConfig& config, const BenchOptions& options);
Result<Calibration> BenchCalibrate(const ModelConfig& config, const BenchOptions& options);
// INVALID_ARGUMENT for bad options (unknown preset, batch < 1, ...);
// UNAVAILABLE if the scratch ipc endpoints cannot be bound.
Result<BenchReport> RunBench(const BenchOptions& options);

// A human-readable table, then one line of JSON (the machine-readable result).
void PrintBench(const BenchReport& report, std::ostream& out);

}  // namespace sy::engine
