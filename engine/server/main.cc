// File: engine/server/main.cc
//
// moe-engine: serve an MoE model with the built-in workload, publishing
// telemetry and answering commands; `bench` for in-process throughput; the
// model tools `make-checkpoint` and `score` (model_tools.h).
//
//   moe-engine [serve] --model tiny --devices 4 --rate 8 --trace summary
//   moe-engine serve --workload none --http-port 8000   # serve HTTP clients only
//   moe-engine serve --model ckpt/             # a config.json + safetensors directory
//   moe-engine bench --model tiny --batch 1,64 --steps 32
//   moe-engine make-checkpoint --preset tiny-hybrid --out ckpt/
//   moe-engine score --model ckpt/ --tokens 256,72,105
//   moe-engine eplb --stats load.json --replicas 20 --groups 4 --nodes 1 --devices 4
//   moe-engine calibrate --model tiny --batches 1,4,16,64
//   moe-engine costmodel --hardware h200 --model qwen3-235b-a22b --phase decode --tokens 256 --ep 8
//   moe-engine keygen --out keys --name engine   # CURVE keys (security_flags.h)
//
// Exit codes: 0 clean stop, 1 runtime failure (e.g. an endpoint cannot be
// bound), 2 bad command line.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "base/flag_checks.h"
#include "engine/eplb/eplb_cli.h"
#include "engine/model/config.h"
#include "engine/pools/pool_sizing.h"
#include "engine/server/bench.h"
#include "engine/server/calibrate_run.h"
#include "engine/server/costmodel_cli.h"
#include "engine/server/engine.h"
#include "engine/server/model_source.h"
#include "engine/server/model_tools.h"
#include "engine/server/scenario_cli.h"
#include "engine/server/security_flags.h"
#include "engine/server/sim_flags.h"
#include "engine/server/workload_flags.h"
#include "engine/workload/workload_file.h"

namespace sy::engine {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Parses; on error prints CLI11's message and returns the exit code to use.
std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  return std::nullopt;
}

// SIGINT/SIGTERM -> Engine::RequestStop() (an atomic store, so
// async-signal-safe). A handler is needed rather than sigwait on a watcher
// thread: OpenBLAS starts its threads before main() with every signal
// unblocked, so a blocked-mask scheme would let the default action kill us.
// The engine pointer is the one piece of global state, as signal delivery
// offers no other way in. RAII: the previous handlers come back on scope exit.
std::atomic<Engine*> g_stop_target{nullptr};

extern "C" void OnStopSignal(int) {
  if (Engine* e = g_stop_target.load()) e->RequestStop();
}

class StopOnSignal {
 public:
  explicit StopOnSignal(Engine* engine) {
    g_stop_target.store(engine);
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignal() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_stop_target.store(nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Creates the engine, serves until it stops or a signal asks; the exit code.
int ServeEngine(EngineOptions o) {
  Result<std::unique_ptr<Engine>> engine = Engine::Create(std::move(o));
  if (!engine.ok()) {
    spdlog::error("cannot start: {}", engine.status().ToString());
    return engine.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  }
  StopOnSignal stop_on_signal(engine->get());
  Status s = (*engine)->Run();
  if (!s.ok()) {
    spdlog::error("engine failed: {}", s.ToString());
    return kExitRuntime;
  }
  return 0;
}

int Serve(int argc, char** argv) {
  CLI::App app{
      "moe-engine: serve a Mixture-of-Experts model over P virtual devices (expert parallel\n"
      "MoE, data-parallel attention) with a built-in workload (--workload) and an\n"
      "OpenAI-compatible HTTP API (--http-port); telemetry on a ZeroMQ XPUB socket, commands\n"
      "on a ROUTER socket. `moe-engine serve` is the same; see `moe-engine bench --help`.",
      "moe-engine"};
  std::string model = "tiny", telemetry = "tcp://127.0.0.1:5555", control = "tcp://127.0.0.1:5556",
              trace = "summary", log_level = "info";
  int devices = 4, kv_pages = 512, state_slots = 64, max_batch_tokens = 512, max_running = 128;
  int64_t pool_memory_mb = 0;
  double state_fraction = 0.25;
  uint64_t seed = 1;
  bool paused = false, no_prefix_cache = false;
  std::string http_host = "127.0.0.1";
  int http_port = 8000, max_queue = 512;
  WorkloadFlags workload;
  std::string save_workload;
  const std::vector<std::string> presets = PresetNames();
  app.add_option("--model", model,
                 "model preset (" + JoinNames(presets) +
                     ") or a model directory (config.json "
                     "+ *.safetensors, e.g. from make-checkpoint)")
      ->capture_default_str();
  app.add_option("--devices", devices, "virtual devices P")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--seed", seed, "weights and workload seed")->capture_default_str();
  app.add_option("--telemetry", telemetry, "XPUB endpoint for the streams (SUB clients connect)")
      ->capture_default_str();
  app.add_option("--control", control, "ROUTER endpoint for commands")->capture_default_str();
  app.add_option("--trace", trace, "trace level")
      ->check(CLI::IsMember({"off", "summary", "full"}))
      ->capture_default_str();
  const CLI::Option* kv_pages_option =
      app.add_option("--kv-pages", kv_pages, "KV cache pages per device")
          ->check(CLI::Range(1, 1 << 22))
          ->capture_default_str();
  SimFlags sim;
  AddSimFlags(app, &sim, kv_pages_option);
  std::string layout = "ep";
  app.add_option("--layout", layout, "MoE layout serving starts in (the `switch` command moves it)")
      ->check(CLI::IsMember({"ep", "tp"}))
      ->capture_default_str();
  app.add_option("--state-slots", state_slots,
                 "recurrent-state slots per device (hybrid models): concurrent requests a "
                 "device can hold")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--pool-memory-mb", pool_memory_mb,
                 "per-device memory for the KV and recurrent-state pools, MiB; when set it "
                 "overrides --kv-pages and --state-slots, split by --state-fraction")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--state-fraction", state_fraction,
                 "share of --pool-memory-mb for recurrent-state slots (hybrid models)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--max-batch-tokens", max_batch_tokens, "token budget per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-running", max_running, "requests running at once (<= max-batch-tokens)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  AddWorkloadFlags(&app, &workload);
  app.add_option("--save-workload", save_workload,
                 "write the workload's arrivals to this JSONL trace and exit (replay it exactly "
                 "with --workload-file); needs a bounded workload (--requests, --duration, ...)");
  app.add_flag("--disable-radix-cache", no_prefix_cache,
               "turn the prefix cache off: every request prefills from position 0");
  app.add_option("--http-host", http_host, "address of the OpenAI-compatible HTTP API")
      ->capture_default_str();
  app.add_option("--http-port", http_port, "port of the OpenAI-compatible HTTP API (0: off)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--max-queue", max_queue, "waiting requests beyond which the HTTP API answers 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_flag("--paused", paused, "start paused (resume with the `resume` command)");
  int redundant = 0, rebalance_every = 0, skew_drift = 0, eplb_nodes = 1;
  double router_skew = 0, rebalance_min_gain = 0.05;
  app.add_option("--redundant-experts", redundant,
                 "extra physical expert slots for EPLB replicas (experts + R must divide over "
                 "the devices)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--router-skew", router_skew,
                 "skew routing toward a few hot experts per layer (Zipf-like router bias; 0: "
                 "off, 1-3: strong)")
      ->check(CLI::Range(0.0, 16.0))
      ->capture_default_str();
  app.add_option("--skew-drift-steps", skew_drift, "move the hot experts every N steps (0: never)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--rebalance-every", rebalance_every,
                 "auto rebalance: plan every N steps (0: off; see rebalance_auto)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--rebalance-min-gain", rebalance_min_gain,
                 "auto rebalance: least predicted balancedness gain worth moving weights")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  std::string policy_mode = "manual";
  int t_high = 256;
  app.add_option("--policy", policy_mode,
                 "TP<->EP switch policy: manual (only the switch command) or auto")
      ->check(CLI::IsMember({"manual", "auto"}))
      ->capture_default_str();
  app.add_option("--t-high", t_high, "auto policy: switch TP -> EP at this batch (T_l = 0.8 T_h)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--eplb-nodes", eplb_nodes, "nodes for EPLB's hierarchical policy")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  SecurityFlags security;
  AddSecurityFlags(&app, &security);
  if (auto code = Parse(app, argc, argv)) return *code;
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto curve = LoadSecurity(security, telemetry, control);
  if (!curve.ok()) {
    std::cerr << "moe-engine: cannot start: " << curve.status().ToString() << "\n";
    return kExitUsage;
  }
  Result<WorkloadSelection> selected = ResolveWorkload(workload);
  if (!selected.ok()) {
    std::cerr << "moe-engine: " << selected.status().message() << "\n";
    return kExitUsage;
  }

  // Under the sim backend nothing is loaded: the model is only a shape to price.
  Result<LoadedModel> loaded =
      sim.sim() ? Result<LoadedModel>(LoadedModel{.config = {},
                                                  .checkpoint = nullptr,
                                                  .tokenizer = MakeByteTokenizer(),
                                                  .source = "sim"})
                : LoadModel(model);
  if (!loaded.ok()) {
    spdlog::error("cannot load the model: {}", loaded.status().ToString());
    return loaded.status().code() == StatusCode::kNotFound ? kExitUsage : kExitRuntime;
  }
  if (pool_memory_mb > 0 && !sim.sim()) {
    Result<PoolSizing> sz = SizePools(loaded->config, ModelRunnerOptions{}.page_size,
                                      pool_memory_mb << 20, state_fraction);
    if (!sz.ok()) {
      spdlog::error("cannot size the pools: {}", sz.status().ToString());
      return kExitUsage;
    }
    kv_pages = sz->kv_pages;
    if (sz->state_slots > 0) state_slots = sz->state_slots;
    spdlog::info("pools per device: {} KV pages ({} MiB), {} state slots ({} MiB)", sz->kv_pages,
                 sz->kv_bytes >> 20, sz->state_slots, sz->state_bytes >> 20);
  }
  if (!save_workload.empty()) {
    WorkloadOptions w = selected->options;
    w.tokenizer = loaded->tokenizer;
    w.seed = seed;
    w.max_prompt_tokens = std::min(w.max_prompt_tokens, loaded->config.max_seq - 1);
    if (!selected->enabled || !w.Bounded()) {
      std::cerr << "moe-engine: --save-workload needs a bounded workload (--requests, "
                   "--duration, a single rollout or a file)\n";
      return kExitUsage;
    }
    const std::vector<Arrival> arrivals = WorkloadGenerator(w).Schedule();
    if (Status s = WriteWorkloadFile(arrivals, save_workload); !s.ok()) {
      spdlog::error("cannot save the workload: {}", s.ToString());
      return kExitRuntime;
    }
    spdlog::info("wrote {} arrivals of '{}' to {}", arrivals.size(), w.Describe(), save_workload);
    return 0;
  }
  EngineOptions o;
  o.model = loaded->config;
  o.runner = {.devices = devices,
              .seed = seed,
              .checkpoint = loaded->checkpoint.get(),
              .kv_pages_per_device = kv_pages,
              .state_slots_per_device = state_slots,
              .router_skew = router_skew,
              .skew_drift_steps = skew_drift};
  o.redundant_experts = redundant;
  o.rebalance_every = rebalance_every;
  o.rebalance_min_gain = rebalance_min_gain;
  o.eplb_nodes = eplb_nodes;
  o.policy.mode = policy_mode == "auto" ? PolicyMode::kAuto : PolicyMode::kManual;
  o.policy.t_high = t_high;
  o.workload = std::move(selected->options);
  o.workload.tokenizer = loaded->tokenizer;
  o.workload.seed = seed;
  o.workload_enabled = selected->enabled;
  o.scheduler.max_batch_tokens = max_batch_tokens;
  o.scheduler.max_running = max_running;
  o.scheduler.prefix_cache = !no_prefix_cache;
  o.http_enabled = http_port > 0;
  o.http.host = http_host;
  o.http.port = http_port;
  o.max_queue = max_queue;
  o.tokenizer = loaded->tokenizer;
  o.publisher.endpoint = telemetry;
  o.control_endpoint = control;
  o.curve = std::move(curve).value();
  o.trace_level = ParseTraceLevel(trace).value();
  o.start_paused = paused;
  o.initial_layout = layout == "tp" ? ParallelMode::kTP : ParallelMode::kEP;
  o.exit_when_done = selected->enabled && selected->bounded;

  if (sim.sim()) {
    if (Status st = ApplySimFlags(sim, model, seed, &o); !st.ok()) {
      std::cerr << "moe-engine: " << st.message() << "\n";
      return kExitUsage;
    }
  }
  return ServeEngine(std::move(o));
}

int Bench(int argc, char** argv) {
  CLI::App app{"moe-engine bench: decode throughput per batch size and the cost of tracing",
               "moe-engine bench"};
  BenchOptions o;
  const std::vector<std::string> presets = PresetNames();
  std::string log_level = "warn";
  app.add_option("--model", o.model, "model preset: " + JoinNames(presets))
      ->check(CLI::IsMember(presets))
      ->capture_default_str();
  app.add_option("--devices", o.devices, "virtual devices P")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "weights seed")->capture_default_str();
  app.add_option("--batch", o.batches, "decode batch sizes, comma separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--steps", o.steps, "timed decode steps per batch size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "prompt tokens per decode request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  o.trace_compare = false;
  app.add_flag("--trace-compare", o.trace_compare,
               "also serve one burst with tracing off and one with tracing full "
               "(publishing to an ipc socket with no subscriber) and compare tokens/s");
  app.add_option("--serve-requests", o.serve_requests, "burst size of the tracing comparison")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--serve-output", o.serve_output, "tokens per request there")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--serve-repeats", o.serve_repeats, "alternating off/full runs; best of each")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--prefill-len", o.prefill_len,
                 "hybrid models: prompt tokens of the chunk-wise vs recurrent prefill "
                 "comparison (0: skip)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--agentic-sessions", o.agentic_sessions,
                 "sessions of the agentic prefix-cache comparison, served closed-loop with "
                 "the cache on and off (0: skip)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--eplb-batch", o.eplb_batch,
                 "decode requests of the live-rebalance comparison under skewed routing (0: skip)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--eplb-steps", o.eplb_steps, "decode steps measured before and after it")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  app.add_option("--eplb-skew", o.eplb_skew, "router skew of that run (--router-skew)")
      ->check(CLI::Range(0.0, 16.0))
      ->capture_default_str();
  app.add_option("--eplb-redundant", o.eplb_redundant,
                 "redundant experts of its second run (0: only the run without)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--switch-rounds", o.switch_rounds,
                 "EP -> TP -> EP round trips timed per preset (0: skip)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--switch-large", o.switch_large, "the larger preset of the switch figures")
      ->capture_default_str();
  app.add_option("--calibrate-batches", o.calibrate_batches,
                 "batch sizes of the TP vs EP calibration (comma separated; none: skip)")
      ->delimiter(',');
  app.add_option("--agentic-turns", o.agentic_turns, "turns per agentic session")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--agentic-output", o.agentic_output, "tokens generated per agentic turn")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  if (auto code = Parse(app, argc, argv)) return *code;
  spdlog::set_level(spdlog::level::from_str(log_level));
  Result<BenchReport> r = RunBench(o);
  if (!r.ok()) {
    spdlog::error("bench failed: {}", r.status().ToString());
    return r.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  }
  PrintBench(*r, std::cout);
  return 0;
}

int MakeCheckpointMain(int argc, char** argv) {
  CLI::App app{
      "moe-engine make-checkpoint: write a preset's weights as a checkpoint directory "
      "(config.json + safetensors in the Ling3 layout)",
      "moe-engine make-checkpoint"};
  MakeCheckpointOptions o;
  std::string dtype = "f32";
  const std::vector<std::string> presets = PresetNames();
  app.add_option("--preset", o.preset, "model preset: " + JoinNames(presets))
      ->required()
      ->check(CLI::IsMember(presets));
  app.add_option("--out", o.out, "directory to create (must not exist)")->required();
  app.add_option("--seed", o.seed, "weights seed")->capture_default_str();
  app.add_option("--dtype", dtype, "tensor dtype on disk")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  int64_t shard_mb = 2048;
  app.add_option("--shard-mb", shard_mb, "largest safetensors shard, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  if (auto code = Parse(app, argc, argv)) return *code;
  o.dtype = dtype == "bf16" ? DType::kBF16 : DType::kF32;
  o.shard_bytes = shard_mb << 20;
  Status s = MakeCheckpoint(o);
  if (!s.ok()) {
    spdlog::error("make-checkpoint failed: {}", s.ToString());
    return kExitRuntime;
  }
  spdlog::info("wrote {} ({} in {})", o.out, o.preset, dtype);
  return 0;
}

int ScoreMain(int argc, char** argv) {
  CLI::App app{
      "moe-engine score: the logits after every token of a sequence, as JSON "
      "{\"logits\": [[...], ...]}",
      "moe-engine score"};
  ScoreOptions o;
  std::string dir, preset;
  auto* m = app.add_option("--model", dir, "model directory (config.json + *.safetensors)");
  app.add_option("--preset", preset, "model preset: " + JoinNames(PresetNames()))
      ->check(CLI::IsMember(PresetNames()))
      ->excludes(m);
  app.add_option("--tokens", o.tokens, "token ids, comma separated")
      ->required()
      ->delimiter(',')
      ->check(NonNegative());
  app.add_option("--devices", o.devices, "virtual devices P")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "weights seed (presets)")->capture_default_str();
  if (auto code = Parse(app, argc, argv)) return *code;
  if (dir.empty() == preset.empty()) {
    std::cerr << "moe-engine score: give exactly one of --model DIR or --preset P\n";
    return kExitUsage;
  }
  o.model = dir.empty() ? preset : dir;
  Result<std::vector<std::vector<float>>> r = Score(o);
  if (!r.ok()) {
    spdlog::error("score failed: {}", r.status().ToString());
    return r.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  }
  PrintScore(*r, std::cout);
  return 0;
}

}  // namespace
}  // namespace sy::engine

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("moe-engine"));
  // `moe-engine serve ...` and `moe-engine ...` are the same; the others have their own flags.
  std::vector<char*> args(argv, argv + argc);
  const std::string sub = argc > 1 ? argv[1] : "";
  const bool known = sub == "bench" || sub == "serve" || sub == "make-checkpoint" ||
                     sub == "score" || sub == "eplb" || sub == "calibrate" || sub == "costmodel" ||
                     sub == "scenario" || sub == "keygen";
  if (known) args.erase(args.begin() + 1);
  const int n = static_cast<int>(args.size());
  if (sub == "bench") return sy::engine::Bench(n, args.data());
  if (sub == "make-checkpoint") return sy::engine::MakeCheckpointMain(n, args.data());
  if (sub == "score") return sy::engine::ScoreMain(n, args.data());
  if (sub == "eplb") return sy::engine::EplbMain(n, args.data());
  if (sub == "calibrate") return sy::engine::CalibrateMain(n, args.data());
  if (sub == "costmodel") return sy::engine::CostModelMain(n, args.data());
  if (sub == "keygen") return sy::engine::KeygenMain(n, args.data());
  if (sub == "scenario") return sy::engine::ScenarioMain(n, args.data(), sy::engine::ServeEngine);
  return sy::engine::Serve(n, args.data());
}
