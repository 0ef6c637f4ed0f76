// File: engine/server/sim_flags.h
//
// The simulated-cluster backend on moe-engine's command line:
//   moe-engine --backend sim --hardware h200 --model qwen3-235b-a22b --devices 8
//              [--speed 1] [--routing-skew 1.0] [--routing-drift-s 10] ...
// Under `sim`, --model names a catalogue model (data/models/), an HF
// config.json, or an engine preset (priced as its shape); nothing is loaded
// or computed (engine/sim/sim_runner.h). Apart from main.cc so the flags are
// tested without starting an engine.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/server/engine.h"

namespace sy::engine {

struct SimFlags {
  std::string backend = "cpu";  // cpu | sim
  std::string hardware = "h200";
  std::string catalog;  // data/ directory; empty: the source tree's
  double speed = 0;     // 0: as fast as possible; s: s x real time
  std::string dtype = "bf16";
  std::string weight_dtype = "bf16";
  std::string overlap = "serial";  // serial | hide-comm
  double efficiency_compute = 0.6, efficiency_hbm = 0.8, efficiency_link = 0.7;
  // measured: attention, router and experts at the hardware file's
  // measured_kernels where it has them (docs/SIMULATION.md); flat: the
  // efficiency factors above for every kernel.
  std::string kernels = "measured";
  // SimOptions' collective latencies; < 0: the hardware file's.
  double allreduce_latency_us = -1;
  double all_to_all_latency_us = -1;
  double routing_skew = 1.0;
  double routing_drift_s = 10;
  double routing_drift_fraction = 0.1;
  int max_seq = 32768;
  // Share of each device's HBM for weights and the KV cache (SGLang's
  // mem_fraction_static); the rest is left for activations. Seed 003 §9.1
  // serves with 0.85.
  double memory_fraction = 0.9;
  // EP layout: attention tensor parallel within groups of this many devices
  // (SimOptions::attention_tp; seed 000: 4).
  int attention_tp = 1;
  // Set by AddSimFlags: whether --kv-pages was given (else the sim sizes the
  // pool from HBM left after the weights).
  const CLI::Option* kv_pages_option = nullptr;

  bool sim() const { return backend == "sim"; }
};

// Adds --backend and the sim's flags to `app`. `kv_pages` is the app's
// --kv-pages option (to tell whether the operator sized the pool).
void AddSimFlags(CLI::App& app, SimFlags* flags, const CLI::Option* kv_pages);

// Fills o->model, o->sim, o->sim_speed and o->runner.kv_pages_per_device
// (unless --kv-pages was given) for `--backend sim`; `model` is --model,
// `seed` seeds the routing model. INVALID_ARGUMENT / NOT_FOUND with the flag
// and the known names for an unknown hardware, model or dtype, or when the
// model's weights do not fit the devices.
Status ApplySimFlags(const SimFlags& flags, const std::string& model, uint64_t seed,
                     EngineOptions* o);

}  // namespace sy::engine
