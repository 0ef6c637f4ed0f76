// File: engine/server/rebalance.cc
//
// The Engine's side of live expert rebalancing: the rebalance and
// rebalance_auto commands, the per-turn poll that commits staged layers
// (engine/eplb/applier.h) and publishes their events, the auto policy, and
// the measurement a while after a rebalance (balancedness and MoE time per
// step, before against after). Runs on the loop thread only.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "engine/server/engine.h"

namespace sy::engine {
namespace {

using nlohmann::json;

constexpr size_t kMoeWindow = 256;  // steps of MoE time kept
constexpr int kMeasureSteps = 32;   // steps before / after a rebalance that are compared

std::string Fixed(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

int64_t Engine::ExpertBytes() const {
  const ModelConfig& c = options_.model;
  return 3LL * c.hidden * c.expert_inter * static_cast<int64_t>(sizeof(float));
}

void Engine::RecordMoeTime(const StepOutput& out) {
  if (out.spans.empty()) return;
  std::vector<int64_t> per_device(runner_->devices(), 0);
  for (const telemetry::Span& s : out.spans) {
    if (s.name == "expert_ffn" && s.device >= 0 && s.device < runner_->devices()) {
      per_device[s.device] += s.dur_us;
    }
  }
  moe_ms_.push_back(static_cast<double>(*std::max_element(per_device.begin(), per_device.end())) /
                    1000.0);
  while (moe_ms_.size() > kMoeWindow) moe_ms_.pop_front();
}

double Engine::MeanMoeMs(int steps) const {
  const size_t n = std::min(moe_ms_.size(), static_cast<size_t>(steps));
  if (n == 0) return 0;
  double sum = 0;
  for (size_t i = moe_ms_.size() - n; i < moe_ms_.size(); ++i) sum += moe_ms_[i];
  return sum / static_cast<double>(n);
}

void Engine::RefreshPlacement() {
  Result<eplb::Placement> p = eplb::PlacementOf(runner_->expert_map());
  if (p.ok()) {
    placement_.emplace(std::move(p).value());
  } else {
    spdlog::warn("placement: {}", p.status().ToString());
  }
}

Result<json> Engine::RebalanceCommand(const json& args) {
  if (!expert_stats_) return FailedPrecondition("rebalance: the model has no routed experts");
  bool dry_run = false;
  eplb::RebalanceOptions o{.window = options_.rebalance_window,
                           .num_groups = std::max(1, options_.model.n_group),
                           .num_nodes = options_.eplb_nodes};
  std::optional<eplb::ApplierFault> fault;
  for (const auto& [key, value] : args.items()) {
    if (key == "dry_run" && value.is_boolean()) {
      dry_run = value.get<bool>();
    } else if (key == "window" && value.is_number_integer()) {
      o.window = value.get<int>();
    } else if (key == "policy" && value.is_string()) {
      ASSIGN_OR_RETURN(o.policy, ParseEplbPolicy(value.get<std::string>()));
    } else if (key == "inject_fault" && value.is_object() && value.contains("layer") &&
               value["layer"].is_number_integer()) {
      fault = eplb::ApplierFault{.layer = value["layer"].get<int>(),
                                 .after_bytes = value.value("after_bytes", int64_t{0})};
    } else {
      return InvalidArgument("rebalance: unknown or mistyped argument '" + key +
                             "' (dry_run: bool, window: int, policy: "
                             "\"auto\"|\"hierarchical\"|\"global\")");
    }
  }
  if (o.window < 0 || o.window > expert_stats_->capacity()) {
    return InvalidArgument("rebalance: window must be in [0, " +
                           std::to_string(expert_stats_->capacity()) + "] steps, got " +
                           std::to_string(o.window));
  }
  if (!dry_run && runner_->parallel_mode() != ParallelMode::kEP) {
    return FailedPrecondition(
        "rebalance: the experts are in the TP layout (every device holds a slice of every "
        "expert, nothing to balance); switch to EP first");
  }
  if (!dry_run && applier_->busy()) {
    return FailedPrecondition("rebalance: a rebalance is already in progress");
  }
  ASSIGN_OR_RETURN(eplb::RebalancePlan plan,
                   eplb::PlanRebalance(*expert_stats_, runner_->expert_map(), o, ExpertBytes()));
  json result = {{"plan", eplb::PlanJson(plan)}, {"started", false}};
  if (dry_run) return result;
  const double before = MeanMoeMs(kMeasureSteps);
  // Measured = the load the devices really carried over the last steps under
  // the placement that served them (the window summed, then balanced: a mean
  // of per-step values would mostly measure how few tokens a small step has).
  Result<eplb::Balancedness> measured =
      expert_stats_->WindowBalancedness(kMeasureSteps, *placement_);
  Result<eplb::Balancedness> per_step = expert_stats_->StepBalancedness(kMeasureSteps);
  RETURN_IF_ERROR(applier_->Start(plan, fault));
  PublishEvent("rebalance", "rebalance", "planned",
               "rebalance: " + std::to_string(plan.experts_moved) + " expert weights to move, " +
                   "balancedness " + Fixed(plan.mean_before) + " -> " + Fixed(plan.mean_after),
               eplb::PlanJson(plan));
  rebalance_ = RebalanceRun{.plan = std::move(plan),
                            .start_step = scheduler_->step(),
                            .moe_ms_before = before,
                            .measured_before = measured.ok() ? measured->mean : 1.0,
                            .step_before = per_step.ok() ? per_step->mean : 1.0};
  result["started"] = true;
  return result;
}

Result<json> Engine::RebalanceAutoCommand(const json& args) {
  int every = options_.rebalance_every, window = options_.rebalance_window;
  double min_gain = options_.rebalance_min_gain;
  for (const auto& [key, value] : args.items()) {
    if (key == "every" && value.is_number_integer()) {
      every = value.get<int>();
    } else if (key == "min_gain" && value.is_number()) {
      min_gain = value.get<double>();
    } else if (key == "window" && value.is_number_integer()) {
      window = value.get<int>();
    } else {
      return InvalidArgument("rebalance_auto: unknown or mistyped argument '" + key +
                             "' (every: int steps, 0 = off; min_gain: number; window: int)");
    }
  }
  if (every < 0) return InvalidArgument("rebalance_auto: every must be >= 0 (0 = off)");
  if (min_gain < 0 || min_gain > 1) return InvalidArgument("rebalance_auto: min_gain in [0, 1]");
  const int cap = expert_stats_ ? expert_stats_->capacity() : 0;
  if (window < 1 || window > cap) {
    return InvalidArgument("rebalance_auto: window must be in [1, " + std::to_string(cap) + "]");
  }
  options_.rebalance_every = every;
  options_.rebalance_min_gain = min_gain;
  options_.rebalance_window = window;
  last_auto_step_ = scheduler_->step();
  return json{{"every", every}, {"min_gain", min_gain}, {"window", window}};
}

void Engine::PollRebalance() {
  if (!applier_) return;
  for (const eplb::ApplierEvent& ev : applier_->Poll()) {
    using Kind = eplb::ApplierEvent::Kind;
    if (ev.kind == Kind::kLayer) {
      RefreshPlacement();
      const ExpertMoveStats& s = ev.layer;
      PublishEvent("rebalance", "rebalance", "layer",
                   std::string(ev.rollback ? "rolled back" : "moved") + " layer " +
                       std::to_string(s.layer) + ": " + std::to_string(s.experts_moved) +
                       " experts, pause " + Fixed(s.commit_ms) + " ms",
                   {{"layer", s.layer},
                    {"moved", s.experts_moved},
                    {"bytes", s.bytes_copied},
                    {"peer_bytes", s.peer_bytes},
                    {"stage_ms", s.stage_ms},
                    {"commit_ms", s.commit_ms},
                    {"rollback", ev.rollback}});
      continue;
    }
    if (ev.kind == Kind::kFailed) {
      PublishEvent("rebalance", "rebalance", "failed",
                   "rebalance failed at layer " + std::to_string(ev.failed_layer) + ": " +
                       ev.error + (ev.rolled_back ? "; old placement restored" : ""),
                   {{"layer", ev.failed_layer},
                    {"error", ev.error},
                    {"rolled_back", ev.rolled_back},
                    {"longest_pause_ms", ev.longest_pause_ms}});
      rebalance_.reset();
      continue;
    }
    json before = json::array(), after = json::array();
    if (rebalance_) {
      for (const eplb::LayerPlan& l : rebalance_->plan.layers) {
        before.push_back(l.before);
        after.push_back(l.after);
      }
    }
    PublishEvent("rebalance", "rebalance", "done",
                 "rebalance done: " + std::to_string(ev.layers) + " layers, " +
                     std::to_string(ev.experts_moved) + " experts moved, longest pause " +
                     Fixed(ev.longest_pause_ms) + " ms",
                 {{"layers", ev.layers},
                  {"experts_moved", ev.experts_moved},
                  {"bytes", ev.bytes},
                  {"longest_pause_ms", ev.longest_pause_ms},
                  {"total_ms", ev.total_ms},
                  {"before", std::move(before)},
                  {"after", std::move(after)},
                  {"moe_ms_before", rebalance_ ? rebalance_->moe_ms_before : 0.0}});
    if (rebalance_) rebalance_->measure_at_step = scheduler_->step() + kMeasureSteps;
  }

  // The promised comparison, once enough steps ran on the new placement.
  if (rebalance_ && rebalance_->measure_at_step >= 0 &&
      scheduler_->step() >= rebalance_->measure_at_step) {
    Result<eplb::Balancedness> after =
        expert_stats_->WindowBalancedness(kMeasureSteps, *placement_);
    Result<eplb::Balancedness> per_step = expert_stats_->StepBalancedness(kMeasureSteps);
    const double b_after = after.ok() ? after->mean : 1.0;
    const double moe_after = MeanMoeMs(kMeasureSteps);
    PublishEvent("rebalance", "rebalance", "measured",
                 "after rebalance: balancedness " + Fixed(rebalance_->measured_before) + " -> " +
                     Fixed(b_after) + ", MoE " + Fixed(rebalance_->moe_ms_before) + " -> " +
                     Fixed(moe_after) + " ms/step",
                 {{"balancedness_before", rebalance_->measured_before},
                  {"balancedness_after", b_after},
                  {"moe_ms_before", rebalance_->moe_ms_before},
                  {"moe_ms_after", moe_after},
                  {"step_balancedness_before", rebalance_->step_before},
                  {"step_balancedness_after", per_step.ok() ? per_step->mean : 1.0},
                  {"steps", kMeasureSteps}});
    rebalance_.reset();
  }

  // Auto policy: plan every N steps, apply when the gain is worth the copies.
  const int every = options_.rebalance_every;
  if (every <= 0 || !expert_stats_ || applier_->busy() || rebalance_ ||
      scheduler_->step() < last_auto_step_ + every) {
    return;
  }
  last_auto_step_ = scheduler_->step();
  eplb::RebalanceOptions o{.window = options_.rebalance_window,
                           .num_groups = std::max(1, options_.model.n_group),
                           .num_nodes = options_.eplb_nodes};
  Result<eplb::RebalancePlan> plan =
      eplb::PlanRebalance(*expert_stats_, runner_->expert_map(), o, ExpertBytes());
  if (!plan.ok()) {
    PublishEvent("rebalance", "auto", "skipped", "auto rebalance: " + plan.status().message());
    return;
  }
  const double gain = plan->mean_after - plan->mean_before;
  if (gain <= options_.rebalance_min_gain) {
    PublishEvent("rebalance", "auto", "skipped",
                 "auto rebalance: predicted gain " + Fixed(gain) + " <= min_gain " +
                     Fixed(options_.rebalance_min_gain),
                 {{"gain", gain}, {"mean_before", plan->mean_before}});
    return;
  }
  Result<json> started = RebalanceCommand(json{{"window", options_.rebalance_window}});
  PublishEvent("rebalance", "auto", started.ok() ? "started" : "skipped",
               "auto rebalance: predicted gain " + Fixed(gain) +
                   (started.ok() ? "" : ": " + started.status().message()),
               {{"gain", gain}});
  if (rebalance_) rebalance_->automatic = true;
}

}  // namespace sy::engine
