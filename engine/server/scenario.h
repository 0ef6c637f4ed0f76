// File: engine/server/scenario.h
//
// Named simulated-cluster scenarios (issue 8): a data file under
// data/scenarios/NAME.json fixes the hardware, model, devices, workload and
// the variants to compare (static TP, static EP, the auto switch policy,
// EP with live EPLB), and each variant runs the real engine on the sim
// backend (engine/sim/sim_runner.h) as fast as the host allows. The results
// come from an EngineObserver (engine.h), so nothing is lost to telemetry
// drops: per phase of the workload, TTFT and TPOT percentiles, throughput and
// balancedness, plus the switches each variant made (scenario_results.h).
//
//   ASSIGN_OR_RETURN(Scenario s, LoadScenario(DefaultCatalogDir(), "moebius-bursty"));
//   ASSIGN_OR_RETURN(EngineOptions o, ScenarioEngineOptions(s, "auto", {}));
//   ... Engine::Create(o), Run() ...      (RunScenarioVariant does all of it)
//
// File format (docs/SIMULATION.md has the catalogue):
//   {"description": "...", "source": "seed 003 §9.2",
//    "hardware": "h200", "model": "qwen3-235b-a22b", "devices": 8,
//    "workload": ["--workload", "bursty", "--phases", "30:5,7:80", ...],
//    "phases": [{"name": "quiet", "metric": "tpot"}, {"name": "burst", "metric": "ttft"}],
//    "variants": ["tp", "ep", "auto"],
//    "engine": {"max_running": 2048, "max_batch_tokens": 16384, "t_high": 256,
//               "redundant_experts": 0, "rebalance_every": 0, "max_seq": 8192,
//               "dtype": "bf16", "overlap": "serial", "memory_fraction": 0.85,
//               "attention_tp": 1, "state_slots": 64, "prefix_cache": true,
//               "kernels": "measured", "allreduce_latency_us": 0,
//               "all_to_all_latency_us": 80},  (latencies: default the hardware's)
//    "routing": {"skew": 1.0, "drift_period_s": 10, "drift_fraction": 0.1}}
// "workload" is moe-engine's own workload flags (workload_flags.h), so a
// scenario means exactly what the same command line would. "phases" names
// the workload's phases in order (bursty --phases), or one phase for the
// whole run; a request belongs to the phase its arrival falls in. A phase's
// metric (ttft | tpot | throughput | makespan) is the figure by which
// variants are compared in it.
//
// Variants: "tp" and "ep" (manual policy, starting in that layout), "auto"
// (the Moebius policy at t_high, starting in TP), "ep-eplb" (EP with
// rebalance_every steps of live EPLB; `eplb_every` in "engine", default 200).
//
// Thread-safety: plain values and functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/server/engine.h"

namespace sy::engine {

struct ScenarioPhase {
  std::string name;
  std::string metric = "ttft";  // ttft | tpot | throughput | makespan
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // the seed section it reproduces
  std::string hardware;
  std::string model;
  int devices = 8;
  std::vector<std::string> workload_args;
  std::vector<ScenarioPhase> phases;
  std::vector<std::string> variants;
  int max_running = 1024;
  int max_batch_tokens = 16384;
  int t_high = 256;
  int redundant_experts = 0;
  int eplb_every = 200;
  int max_seq = 8192;
  std::string dtype = "bf16";
  std::string overlap = "serial";
  double memory_fraction = 0.9;       // SimFlags::memory_fraction
  int attention_tp = 1;               // SimFlags::attention_tp
  int state_slots = 64;               // recurrent-state slots per device (linear attention)
  bool prefix_cache = true;           // SchedulerOptions::prefix_cache
  std::string kernels = "measured";   // SimFlags::kernels (measured | flat)
  double allreduce_latency_us = -1;   // SimFlags::allreduce_latency_us (< 0: the hardware's)
  double all_to_all_latency_us = -1;  // SimFlags::all_to_all_latency_us (< 0: the hardware's)
  RoutingModelOptions routing;
};

// Base names of data/scenarios/*.json in `catalog_dir`, sorted.
std::vector<std::string> ScenarioNames(const std::string& catalog_dir);

// Reads catalog_dir/scenarios/NAME.json (or NAME as a path to a .json file).
// NOT_FOUND listing the known names; INVALID_ARGUMENT naming the file and
// the field for bad JSON, an unknown variant or metric, a workload flag
// moe-engine refuses, or phases that do not match the workload's.
Result<Scenario> LoadScenario(const std::string& catalog_dir, const std::string& name);
Result<Scenario> ParseScenarioJson(const std::string& text, const std::string& source);

// The engine options of one variant: sim backend, workload, scheduler,
// policy, ports. `telemetry` / `control` are the endpoints to bind (a
// headless run binds ephemeral loopback ports). INVALID_ARGUMENT for a
// variant the scenario does not list.
struct ScenarioRunOptions {
  std::string catalog_dir;  // empty: the source tree's data/
  std::string telemetry = "tcp://127.0.0.1:*";
  std::string control = "tcp://127.0.0.1:*";
  double speed = 0;   // sim speed (0: as fast as possible)
  uint64_t seed = 1;  // workload and routing seed
  // Every workload phase's seconds (and --duration) multiplied by this, so
  // tests run a shorter version of a scenario; 1: as written. REQUIRES: > 0.
  double time_scale = 1.0;
};
Result<EngineOptions> ScenarioEngineOptions(const Scenario& scenario, const std::string& variant,
                                            const ScenarioRunOptions& options);

}  // namespace sy::engine
