// File: engine/server/scenario.cc
#include "engine/server/scenario.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/costmodel/catalog.h"
#include "engine/server/sim_flags.h"
#include "engine/server/workload_flags.h"

namespace sy::engine {
namespace {

using nlohmann::json;

const std::set<std::string> kVariants = {"tp", "ep", "auto", "ep-eplb"};
const std::set<std::string> kMetrics = {"ttft", "tpot", "throughput", "makespan"};

// Parses the scenario's workload flags exactly as moe-engine's command line
// would (workload_flags.h), so errors name the flag.
Result<WorkloadSelection> ParseWorkloadArgs(const std::vector<std::string>& args) {
  CLI::App app{"scenario workload"};
  WorkloadFlags flags;
  AddWorkloadFlags(&app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string("workload: ") + e.what());
  }
  return ResolveWorkload(flags);
}

template <typename T>
Status Get(const json& j, const char* key, T* out, const std::string& where) {
  if (!j.contains(key)) return Status::Ok();
  try {
    *out = j.at(key).get<T>();
  } catch (const json::exception&) {
    return InvalidArgument(where + ": \"" + key + "\" has the wrong type");
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ScenarioNames(const std::string& catalog_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(catalog_dir + "/scenarios", ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<Scenario> ParseScenarioJson(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument(source + ": not JSON: " + e.what());
  }
  if (!j.is_object()) return InvalidArgument(source + ": must be a JSON object");
  Scenario s;
  s.name = std::filesystem::path(source).stem().string();
  RETURN_IF_ERROR(Get(j, "description", &s.description, source));
  RETURN_IF_ERROR(Get(j, "source", &s.source, source));
  RETURN_IF_ERROR(Get(j, "hardware", &s.hardware, source));
  RETURN_IF_ERROR(Get(j, "model", &s.model, source));
  RETURN_IF_ERROR(Get(j, "devices", &s.devices, source));
  RETURN_IF_ERROR(Get(j, "workload", &s.workload_args, source));
  RETURN_IF_ERROR(Get(j, "variants", &s.variants, source));
  if (s.hardware.empty() || s.model.empty()) {
    return InvalidArgument(source + ": \"hardware\" and \"model\" are required");
  }
  if (s.devices < 1) return InvalidArgument(source + ": \"devices\" must be >= 1");
  if (s.variants.empty()) return InvalidArgument(source + ": \"variants\" must not be empty");
  for (const std::string& v : s.variants) {
    if (!kVariants.count(v)) {
      return InvalidArgument(source + ": unknown variant '" + v +
                             "' (expected tp, ep, auto or ep-eplb)");
    }
  }
  if (j.contains("phases")) {
    if (!j["phases"].is_array()) return InvalidArgument(source + ": \"phases\" must be an array");
    for (const json& p : j["phases"]) {
      ScenarioPhase ph;
      RETURN_IF_ERROR(Get(p, "name", &ph.name, source + ": phases"));
      RETURN_IF_ERROR(Get(p, "metric", &ph.metric, source + ": phases"));
      if (!kMetrics.count(ph.metric)) {
        return InvalidArgument(source + ": unknown metric '" + ph.metric +
                               "' (expected ttft, tpot, throughput or makespan)");
      }
      s.phases.push_back(std::move(ph));
    }
  }
  if (j.contains("engine")) {
    const json& e = j["engine"];
    const std::string where = source + ": engine";
    RETURN_IF_ERROR(Get(e, "max_running", &s.max_running, where));
    RETURN_IF_ERROR(Get(e, "max_batch_tokens", &s.max_batch_tokens, where));
    RETURN_IF_ERROR(Get(e, "t_high", &s.t_high, where));
    RETURN_IF_ERROR(Get(e, "redundant_experts", &s.redundant_experts, where));
    RETURN_IF_ERROR(Get(e, "eplb_every", &s.eplb_every, where));
    RETURN_IF_ERROR(Get(e, "max_seq", &s.max_seq, where));
    RETURN_IF_ERROR(Get(e, "dtype", &s.dtype, where));
    RETURN_IF_ERROR(Get(e, "overlap", &s.overlap, where));
    RETURN_IF_ERROR(Get(e, "memory_fraction", &s.memory_fraction, where));
    RETURN_IF_ERROR(Get(e, "attention_tp", &s.attention_tp, where));
    RETURN_IF_ERROR(Get(e, "state_slots", &s.state_slots, where));
    RETURN_IF_ERROR(Get(e, "prefix_cache", &s.prefix_cache, where));
    RETURN_IF_ERROR(Get(e, "kernels", &s.kernels, where));
    RETURN_IF_ERROR(Get(e, "allreduce_latency_us", &s.allreduce_latency_us, where));
    RETURN_IF_ERROR(Get(e, "all_to_all_latency_us", &s.all_to_all_latency_us, where));
    if (s.kernels != "measured" && s.kernels != "flat") {
      return InvalidArgument(where + ": \"kernels\" must be \"measured\" or \"flat\"");
    }
    for (const char* k : {"allreduce_latency_us", "all_to_all_latency_us"}) {
      if (e.contains(k) && !(e[k].is_number() && e[k].get<double>() >= 0)) {
        return InvalidArgument(where + ": \"" + k + "\" must be a number >= 0 (µs)");
      }
    }
    if (s.attention_tp < 1 || s.devices % s.attention_tp != 0) {
      return InvalidArgument(where + ": \"attention_tp\" must divide \"devices\"");
    }
    if (s.state_slots < 1) return InvalidArgument(where + ": \"state_slots\" must be >= 1");
    if (!(s.memory_fraction > 0 && s.memory_fraction <= 1)) {
      return InvalidArgument(where + ": \"memory_fraction\" must be in (0, 1]");
    }
  }
  if (j.contains("routing")) {
    const json& r = j["routing"];
    const std::string where = source + ": routing";
    RETURN_IF_ERROR(Get(r, "skew", &s.routing.skew, where));
    RETURN_IF_ERROR(Get(r, "drift_period_s", &s.routing.drift_period_s, where));
    RETURN_IF_ERROR(Get(r, "drift_fraction", &s.routing.drift_fraction, where));
  }
  Result<WorkloadSelection> w = ParseWorkloadArgs(s.workload_args);
  if (!w.ok()) return w.status().WithContext(source);
  if (!w->enabled || !w->bounded) {
    return InvalidArgument(source +
                           ": the workload must be bounded (phases, --duration, "
                           "--requests or a single rollout)");
  }
  const size_t workload_phases = w->options.phases.size();
  if (s.phases.empty()) s.phases.push_back({.name = "all", .metric = "ttft"});
  if (workload_phases > 0 && s.phases.size() != workload_phases) {
    return InvalidArgument(source + ": " + std::to_string(s.phases.size()) +
                           " phases named but the workload has " + std::to_string(workload_phases));
  }
  if (workload_phases == 0 && s.phases.size() != 1) {
    return InvalidArgument(source + ": a workload without --phases has one phase");
  }
  return s;
}

Result<Scenario> LoadScenario(const std::string& catalog_dir, const std::string& name) {
  std::string path = name;
  if (name.find('/') == std::string::npos && name.find(".json") == std::string::npos) {
    path = catalog_dir + "/scenarios/" + name + ".json";
  }
  std::ifstream in(path);
  if (!in) {
    std::string known;
    for (const std::string& n : ScenarioNames(catalog_dir))
      known += (known.empty() ? "" : ", ") + n;
    return NotFound("no scenario '" + name + "' (known: " + known + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseScenarioJson(text.str(), path);
}

Result<EngineOptions> ScenarioEngineOptions(const Scenario& s, const std::string& variant,
                                            const ScenarioRunOptions& run) {
  if (std::find(s.variants.begin(), s.variants.end(), variant) == s.variants.end()) {
    std::string known;
    for (const std::string& v : s.variants) known += (known.empty() ? "" : ", ") + v;
    return InvalidArgument("scenario " + s.name + " has no variant '" + variant + "' (" + known +
                           ")");
  }
  if (!(run.time_scale > 0)) return InvalidArgument("time_scale must be > 0");
  ASSIGN_OR_RETURN(WorkloadSelection w, ParseWorkloadArgs(s.workload_args));
  for (WorkloadOptions::RatePhase& p : w.options.phases) p.seconds *= run.time_scale;
  w.options.duration_s *= run.time_scale;
  w.options.quiet_s *= run.time_scale;
  w.options.burst_s *= run.time_scale;

  EngineOptions o;
  o.runner.devices = s.devices;
  o.runner.seed = run.seed;
  o.runner.state_slots_per_device = s.state_slots;
  o.redundant_experts = s.redundant_experts;
  SimFlags f;
  f.backend = "sim";
  f.hardware = s.hardware;
  f.catalog = run.catalog_dir;
  f.speed = run.speed;
  f.dtype = s.dtype;
  f.weight_dtype = s.dtype;
  f.overlap = s.overlap;
  f.routing_skew = s.routing.skew;
  f.routing_drift_s = s.routing.drift_period_s;
  f.routing_drift_fraction = s.routing.drift_fraction;
  f.max_seq = s.max_seq;
  f.memory_fraction = s.memory_fraction;
  f.attention_tp = s.attention_tp;
  f.kernels = s.kernels;
  f.allreduce_latency_us = s.allreduce_latency_us;
  f.all_to_all_latency_us = s.all_to_all_latency_us;
  RETURN_IF_ERROR(ApplySimFlags(f, s.model, run.seed, &o));
  o.workload = std::move(w.options);
  o.workload.seed = run.seed;
  o.workload_enabled = true;
  o.exit_when_done = true;
  o.scheduler.max_running = s.max_running;
  o.scheduler.max_batch_tokens = s.max_batch_tokens;
  o.scheduler.prefix_cache = s.prefix_cache;
  o.max_queue = std::max(o.max_queue, s.max_running);
  o.publisher.endpoint = run.telemetry;
  o.control_endpoint = run.control;
  o.trace_level = TraceLevel::kSummary;
  o.policy.mode = PolicyMode::kManual;
  o.policy.t_high = s.t_high;
  o.initial_layout = ParallelMode::kEP;
  if (variant == "tp") o.initial_layout = ParallelMode::kTP;
  if (variant == "auto") {
    // Moebius starts where a quiet service is fastest and lets the policy move it.
    o.initial_layout = ParallelMode::kTP;
    o.policy.mode = PolicyMode::kAuto;
  }
  if (variant == "ep-eplb") o.rebalance_every = s.eplb_every;
  return o;
}

}  // namespace sy::engine
