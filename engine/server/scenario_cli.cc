// File: engine/server/scenario_cli.cc
#include "engine/server/scenario_cli.h"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/flag_checks.h"
#include "engine/costmodel/catalog.h"
#include "engine/server/scenario.h"
#include "engine/server/scenario_results.h"

namespace sy::engine {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;

nlohmann::json ResultJson(const Scenario& s, const std::vector<VariantResult>& results) {
  nlohmann::json j = {{"scenario", s.name},
                      {"hardware", s.hardware},
                      {"model", s.model},
                      {"devices", s.devices},
                      {"variants", nlohmann::json::array()}};
  for (const VariantResult& r : results) {
    nlohmann::json v = {{"variant", r.variant},
                        {"requests", r.requests},
                        {"steps", r.steps},
                        {"switches", r.switches},
                        {"switch_log", nlohmann::json::array()},
                        {"rebalances", r.rebalances},
                        {"sim_s", r.sim_s},
                        {"wall_s", r.wall_s},
                        {"output_tok_s", r.output_tok_s},
                        {"balancedness", r.balancedness},
                        {"phases", nlohmann::json::array()}};
    for (const SwitchPoint& sp : r.switch_log) {
      v["switch_log"].push_back({{"at_s", sp.at_s}, {"from", sp.from}, {"to", sp.to}});
    }
    const auto phase_json = [](const PhaseResult& p) {
      return nlohmann::json{{"name", p.name},
                            {"metric", p.metric},
                            {"start_s", p.start_s},
                            {"end_s", p.end_s},
                            {"requests", p.requests},
                            {"ttft_ms", {p.ttft_mean_ms, p.ttft_p50_ms, p.ttft_p99_ms}},
                            {"tpot_ms", {p.tpot_mean_ms, p.tpot_p50_ms, p.tpot_p99_ms}},
                            {"output_tok_s", p.output_tok_s},
                            {"balancedness", p.balancedness},
                            {"decode_batch", p.decode_batch},
                            {"running_max", p.running_max},
                            {"waiting_max", p.waiting_max},
                            {"makespan_s", p.makespan_s}};
    };
    for (const PhaseResult& p : r.phases) v["phases"].push_back(phase_json(p));
    v["pooled"] = nlohmann::json::array();
    for (const PhaseResult& p : r.pooled) v["pooled"].push_back(phase_json(p));
    j["variants"].push_back(std::move(v));
  }
  j["auto_vs_best_static"] = AutoVsBestStatic(results);
  j["auto_vs_best_static_pooled"] = AutoVsBestStatic(results, /*pooled=*/true);
  return j;
}

}  // namespace

int ScenarioMain(int argc, char** argv, const std::function<int(EngineOptions)>& serve_live) {
  CLI::App app{
      "moe-engine scenario: run a named simulated-cluster scenario (data/scenarios/) on the sim\n"
      "backend and print its results table, or serve one variant live for moe-console.\n"
      "Without NAME: list the scenarios.",
      "moe-engine scenario"};
  std::string name, variants, json_out, live, log_level = "warn";
  ScenarioRunOptions run;
  run.speed = 0;
  double live_speed = 1;
  std::string telemetry = "tcp://127.0.0.1:5555", control = "tcp://127.0.0.1:5556";
  app.add_option("name", name, "scenario name or path to a scenario .json");
  app.add_option("--variants", variants, "comma-separated subset of the scenario's variants");
  app.add_option("--time-scale", run.time_scale,
                 "multiply every workload phase's length (a shorter run: 0.1)")
      ->check(Positive())
      ->capture_default_str();
  app.add_option("--seed", run.seed, "workload and routing seed")->capture_default_str();
  int t_high = 0;
  app.add_option("--t-high", t_high,
                 "the auto variant's T_h instead of the scenario's (T_l stays 0.8 T_h); "
                 "`moe-engine calibrate --backend sim` gives the cluster's crossover")
      ->check(CLI::Range(1, 1 << 20));
  std::string kernels;
  app.add_option("--sim-kernels", kernels,
                 "measured | flat instead of the scenario's (moe-engine --help: --sim-kernels)")
      ->check(CLI::IsMember({"measured", "flat"}));
  double allreduce_us = -1, all_to_all_us = -1;
  app.add_option("--allreduce-latency-us", allreduce_us,
                 "fixed µs per all-reduce instead of the scenario's")
      ->check(NonNegative());
  app.add_option("--all-to-all-latency-us", all_to_all_us,
                 "fixed µs per all-to-all instead of the scenario's")
      ->check(NonNegative());
  app.add_option("--catalog", run.catalog_dir, "catalogue directory (default: the source's data/)");
  app.add_option("--json", json_out, "also write the results as JSON to this file");
  app.add_option("--live", live, "serve this variant live (telemetry and commands) instead");
  app.add_option("--speed", live_speed, "--live: simulated seconds per real second (0: flat out)")
      ->check(NonNegative())
      ->capture_default_str();
  app.add_option("--telemetry", telemetry, "--live: XPUB endpoint")->capture_default_str();
  app.add_option("--control", control, "--live: ROUTER endpoint")->capture_default_str();
  app.add_option("--log-level", log_level, "log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  const std::string dir =
      run.catalog_dir.empty() ? costmodel::DefaultCatalogDir() : run.catalog_dir;
  if (name.empty()) {
    for (const std::string& n : ScenarioNames(dir)) {
      Result<Scenario> s = LoadScenario(dir, n);
      std::cout << n << "\t"
                << (s.ok() ? s->description : "(invalid: " + s.status().message() + ")") << "\n";
    }
    return 0;
  }
  Result<Scenario> scenario = LoadScenario(dir, name);
  if (!scenario.ok()) {
    std::cerr << "moe-engine scenario: " << scenario.status().message() << "\n";
    return kExitUsage;
  }
  if (t_high > 0) scenario->t_high = t_high;
  if (!kernels.empty()) scenario->kernels = kernels;
  if (allreduce_us >= 0) scenario->allreduce_latency_us = allreduce_us;
  if (all_to_all_us >= 0) scenario->all_to_all_latency_us = all_to_all_us;
  // The results name the latencies the runs used, also when they are the
  // hardware file's (an unknown hardware fails below, with its own message).
  if (Result<costmodel::HardwareSpec> hw = costmodel::LoadHardware(dir, scenario->hardware);
      hw.ok()) {
    if (scenario->allreduce_latency_us < 0)
      scenario->allreduce_latency_us = hw->allreduce_latency_us;
    if (scenario->all_to_all_latency_us < 0) {
      scenario->all_to_all_latency_us = hw->all_to_all_latency_us;
    }
  }
  if (!live.empty()) {
    run.telemetry = telemetry;
    run.control = control;
    run.speed = live_speed;
    Result<EngineOptions> o = ScenarioEngineOptions(*scenario, live, run);
    if (!o.ok()) {
      std::cerr << "moe-engine scenario: " << o.status().message() << "\n";
      return kExitUsage;
    }
    spdlog::set_level(spdlog::level::info);
    return serve_live(std::move(o).value());
  }
  std::vector<std::string> chosen = scenario->variants;
  if (!variants.empty()) {
    chosen.clear();
    std::stringstream ss(variants);
    for (std::string v; std::getline(ss, v, ',');) chosen.push_back(v);
  }
  std::vector<VariantResult> results;
  for (const std::string& v : chosen) {
    std::cerr << "running " << scenario->name << " (" << v << ")...\n";
    Result<VariantResult> r = RunScenarioVariant(*scenario, v, run);
    if (!r.ok()) {
      std::cerr << "moe-engine scenario: " << r.status().message() << "\n";
      return r.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
    }
    results.push_back(std::move(r).value());
  }
  std::cout << FormatScenarioTable(*scenario, results);
  if (!json_out.empty()) {
    std::ofstream out(json_out);
    out << ResultJson(*scenario, results).dump(2) << "\n";
    if (!out) {
      std::cerr << "moe-engine scenario: cannot write " << json_out << "\n";
      return kExitRuntime;
    }
  }
  return 0;
}

}  // namespace sy::engine
