// File: engine/server/calibrate_cli.cc
//
// `moe-engine calibrate`: MeasureLayouts + FitCrossover on a preset or a
// checkpoint (or, with --backend sim, a catalogue model on simulated
// hardware), printed as FormatCalibrationTable's table and then one line of
// JSON (CalibrationToJson), so the thresholds can be read by eye and by tools.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "engine/server/calibrate_run.h"
#include "engine/server/engine.h"
#include "engine/server/model_source.h"
#include "engine/server/sim_flags.h"

namespace sy::engine {
namespace {

// Prints the fit of `pts` under a title; the exit code.
int Report(Result<std::vector<LatencyPoint>> pts, const std::string& title) {
  if (!pts.ok()) {
    std::cerr << "moe-engine calibrate: " << pts.status().ToString() << "\n";
    return pts.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  Result<Calibration> c = FitCrossover(std::move(pts).value());
  if (!c.ok()) {
    std::cerr << "moe-engine calibrate: " << c.status().ToString() << "\n";
    return 1;
  }
  std::cout << "calibrate " << title << "\n"
            << FormatCalibrationTable(*c) << "\n"
            << CalibrationToJson(*c) << "\n";
  return 0;
}

}  // namespace

int CalibrateMain(int argc, char** argv) {
  CLI::App app{
      "moe-engine calibrate: measure the decode step latency of the EP and TP MoE layouts at\n"
      "several batch sizes and fit the crossover batch and the switch thresholds T_h, T_l.\n"
      "With --backend sim the steps are priced by the cost model of --hardware (simulated ms).",
      "moe-engine calibrate"};
  std::string model = "tiny";
  int devices = 4;
  uint64_t seed = 1;
  CalibrateRunOptions o;
  app.add_option("--model", model, "preset name or model directory")->capture_default_str();
  app.add_option("--devices", devices, "virtual devices P")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--seed", seed, "weights seed (presets)")->capture_default_str();
  app.add_option("--batches", o.batches, "decode batch sizes, comma separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--steps", o.steps, "timed decode steps per layout and batch")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "prompt tokens per request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  SimFlags sim_flags;
  AddSimFlags(app, &sim_flags, nullptr);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (sim_flags.sim()) {
    EngineOptions eo;
    eo.runner.devices = devices;
    eo.runner.seed = seed;
    if (Status st = ApplySimFlags(sim_flags, model, seed, &eo); !st.ok()) {
      std::cerr << "moe-engine calibrate: " << st.ToString() << "\n";
      return 2;
    }
    return Report(MeasureLayouts(SimLayoutBench(eo.model, *eo.sim), eo.model, eo.runner, o),
                  eo.model.name + " on " + std::to_string(devices) + " x " + sim_flags.hardware +
                      " (simulated decode step ms, prompt " + std::to_string(o.prompt_len) + ")");
  }
  Result<LoadedModel> loaded = LoadModel(model);
  if (!loaded.ok()) {
    std::cerr << "moe-engine calibrate: " << loaded.status().ToString() << "\n";
    return 2;
  }
  ModelRunnerOptions ro{.devices = devices, .seed = seed, .checkpoint = loaded->checkpoint.get()};
  return Report(
      MeasureLayouts(loaded->config, ro, o),
      loaded->config.name + " on " + std::to_string(devices) + " devices (decode step ms)");
}

}  // namespace sy::engine
