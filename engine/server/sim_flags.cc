// File: engine/server/sim_flags.cc
#include "engine/server/sim_flags.h"

#include <cmath>

#include "base/flag_checks.h"
#include "engine/costmodel/catalog.h"

namespace sy::engine {

void AddSimFlags(CLI::App& app, SimFlags* f, const CLI::Option* kv_pages) {
  f->kv_pages_option = kv_pages;
  app.add_option("--backend", f->backend,
                 "cpu: real numerics on this machine; sim: the same serving stack priced by the "
                 "cost model of --hardware on a virtual clock (docs/SIMULATION.md)")
      ->check(CLI::IsMember({"cpu", "sim"}))
      ->capture_default_str();
  app.add_option("--hardware", f->hardware, "sim: accelerator (data/hardware/NAME.json)")
      ->capture_default_str();
  app.add_option("--catalog", f->catalog,
                 "sim: the catalogue directory (default: the source's data/)");
  app.add_option("--speed", f->speed,
                 "sim: simulated seconds per real second (0: as fast as possible)")
      ->check(NonNegative())
      ->capture_default_str();
  app.add_option("--sim-dtype", f->dtype, "sim: compute dtype (fp8 | bf16)")->capture_default_str();
  app.add_option("--sim-weight-dtype", f->weight_dtype, "sim: expert weight dtype (fp8 | bf16)")
      ->capture_default_str();
  app.add_option("--sim-overlap", f->overlap,
                 "sim: serial, or hide-comm (all-to-all under the expert math)")
      ->check(CLI::IsMember({"serial", "hide-comm"}))
      ->capture_default_str();
  app.add_option("--sim-efficiency", f->efficiency_compute,
                 "sim: fraction of peak FLOP/s the kernels reach")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--sim-hbm-efficiency", f->efficiency_hbm, "sim: fraction of HBM bandwidth")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--sim-link-efficiency", f->efficiency_link, "sim: fraction of link bandwidth")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--sim-kernels", f->kernels,
                 "sim: measured: attention, router and experts at the rates and floors timed on "
                 "the hardware (its file's measured_kernels, where it has them); flat: the "
                 "efficiency factors for every kernel")
      ->check(CLI::IsMember({"measured", "flat"}))
      ->capture_default_str();
  app.add_option("--sim-allreduce-latency-us", f->allreduce_latency_us,
                 "sim: fixed µs added to every all-reduce (default: the hardware file's)")
      ->check(NonNegative());
  app.add_option("--sim-all-to-all-latency-us", f->all_to_all_latency_us,
                 "sim: fixed µs added to every all-to-all (default: the hardware file's)")
      ->check(NonNegative());
  app.add_option("--routing-skew", f->routing_skew,
                 "sim: Zipf exponent of expert popularity (0: uniform routing)")
      ->check(NonNegative())
      ->capture_default_str();
  app.add_option("--routing-drift-s", f->routing_drift_s,
                 "sim: simulated seconds between popularity drifts (0: never)")
      ->check(NonNegative())
      ->capture_default_str();
  app.add_option("--routing-drift-fraction", f->routing_drift_fraction,
                 "sim: share of experts that change rank at each drift")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--sim-memory-fraction", f->memory_fraction,
                 "sim: share of HBM for weights and KV cache (the rest: activations)")
      ->check(CLI::Range(0.05, 1.0))
      ->capture_default_str();
  app.add_option("--sim-attention-tp", f->attention_tp,
                 "sim: EP layout: attention tensor parallel within groups of this many devices "
                 "(data parallel across groups)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--sim-max-seq", f->max_seq, "sim: longest request (prompt + output) in tokens")
      ->check(CLI::Range(2, 1 << 22))
      ->capture_default_str();
}

Status ApplySimFlags(const SimFlags& f, const std::string& model, uint64_t seed, EngineOptions* o) {
  const std::string dir = f.catalog.empty() ? costmodel::DefaultCatalogDir() : f.catalog;
  SimOptions sim;
  ASSIGN_OR_RETURN(sim.hardware, costmodel::LoadHardware(dir, f.hardware));
  Result<costmodel::ModelSpec> spec = costmodel::LoadModel(dir, model);
  if (!spec.ok()) {
    // An engine preset is priced as its shape: a small model on big hardware.
    Result<ModelConfig> preset = PresetConfig(model);
    if (!preset.ok()) return spec.status().WithContext("--model");
    spec = costmodel::SpecFromModelConfig(*preset);
  }
  sim.model = std::move(spec).value();
  ASSIGN_OR_RETURN(sim.compute_dtype, costmodel::ParseDtype(f.dtype));
  ASSIGN_OR_RETURN(sim.weight_dtype, costmodel::ParseDtype(f.weight_dtype));
  sim.overlap =
      f.overlap == "hide-comm" ? costmodel::Overlap::kHideComm : costmodel::Overlap::kSerial;
  sim.efficiency = {
      .compute = f.efficiency_compute, .hbm = f.efficiency_hbm, .link = f.efficiency_link};
  if (f.kernels == "measured") sim.kernels = sim.hardware.measured;
  sim.allreduce_latency_us =
      f.allreduce_latency_us >= 0 ? f.allreduce_latency_us : sim.hardware.allreduce_latency_us;
  sim.all_to_all_latency_us =
      f.all_to_all_latency_us >= 0 ? f.all_to_all_latency_us : sim.hardware.all_to_all_latency_us;
  sim.attention_tp = f.attention_tp;
  sim.routing = {.skew = f.routing_skew,
                 .drift_period_s = f.routing_drift_s,
                 .drift_fraction = f.routing_drift_fraction,
                 .seed = seed};
  ASSIGN_OR_RETURN(o->model, SimModelConfig(sim.model, f.max_seq));
  const bool sized_by_operator = f.kv_pages_option != nullptr && f.kv_pages_option->count() > 0;
  if (!sized_by_operator) {
    ASSIGN_OR_RETURN(o->runner.kv_pages_per_device,
                     SimKvPagesPerDevice(sim, o->runner.devices, o->runner.page_size,
                                         1 - f.memory_fraction, o->runner.state_slots_per_device));
  }
  o->runner.checkpoint = nullptr;
  o->sim = std::move(sim);
  o->sim_speed = f.speed;
  o->experts_every_us = 100'000;
  return Status::Ok();
}

}  // namespace sy::engine
