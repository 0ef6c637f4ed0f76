// File: engine/server/parallel.cc
//
// The Engine's side of runtime TP <-> EP switching (docs/PARALLELISM.md): the
// switch and policy commands, the auto policy run once per step, and the
// switch itself (ModelRunner::SwitchParallelism) with its events. Runs on the
// loop thread, between steps.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "engine/scheduler/rehome.h"
#include "engine/server/engine.h"

namespace sy::engine {
namespace {

using nlohmann::json;

std::string Fixed(double v, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Result<ParallelMode> ParseMode(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "tp" || s == "TP") return ParallelMode::kTP;
    if (s == "ep" || s == "EP") return ParallelMode::kEP;
  }
  return InvalidArgument("switch: \"to\" must be \"tp\" or \"ep\", got " + v.dump());
}

Result<ReshardPhase> ParsePhase(const json& v) {
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "permute") return ReshardPhase::kPermute;
  if (s == "exchange") return ReshardPhase::kExchange;
  if (s == "place") return ReshardPhase::kPlace;
  return InvalidArgument("switch: inject_fault.phase must be permute, exchange or place");
}

Result<SwitchPart> ParsePart(const json& v) {
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "weights") return SwitchPart::kWeights;
  if (s == "state") return SwitchPart::kState;
  return InvalidArgument("switch: inject_fault.part must be weights or state");
}

json StatsJson(const SwitchStats& s) {
  return {{"from", std::string(ParallelModeName(s.from))},
          {"to", std::string(ParallelModeName(s.to))},
          {"layers", s.layers},
          {"weights_ms", s.weights_ms},
          {"permute_ms", s.permute_ms},
          {"exchange_ms", s.exchange_ms},
          {"place_ms", s.place_ms},
          {"state_ms", s.state_ms},
          {"state_bytes", s.state_bytes},
          {"state_gbps", s.state_gbps},
          {"kv_pages", s.kv_pages},
          {"state_slots", s.state_slots},
          {"other_ms", s.other_ms},
          {"rollback_ms", s.rollback_ms},
          {"total_ms", s.total_ms},
          {"bytes", s.bytes_moved},
          {"gbps", s.gbps},
          {"rolled_back", s.rolled_back}};
}

PolicyLayout ToPolicy(ParallelMode m) {
  return m == ParallelMode::kTP ? PolicyLayout::kTp : PolicyLayout::kEp;
}

}  // namespace

json Engine::PolicyJson() const {
  const PolicyOptions& o = policy_->options();
  return {{"mode", std::string(PolicyModeName(o.mode))},
          {"t_high", o.t_high},
          {"t_low", EffectiveTLow(o)},
          {"t_low_auto", !o.t_low.has_value()},
          {"window", o.window},
          {"cooldown", o.cooldown},
          {"queue", o.queue},
          {"rollout", std::string(RolloutVariantName(o.rollout))},
          {"layout", std::string(ParallelModeName(runner_->parallel_mode()))},
          {"describe", DescribePolicyOptions(o)}};
}

Result<json> Engine::SwitchTo(ParallelMode target, const FaultPlan* fault, const std::string& why) {
  if (applier_ && applier_->busy()) {
    return FailedPrecondition("switch: a rebalance is in progress; switch after its done event");
  }
  const ParallelMode from = runner_->parallel_mode();
  json rehome = nullptr;
  if (from == ParallelMode::kTP && target == ParallelMode::kEP) {
    ASSIGN_OR_RETURN(rehome, RehomeForEp());
  }
  const int evicted = MakeRoomForLayout(target);
  Result<SwitchStats> s = runner_->SwitchParallelism(target, fault);
  if (!s.ok()) {
    const bool rolled_back = s.status().code() == StatusCode::kUnavailable;
    PublishEvent("switch", "switch", rolled_back ? "failed" : "refused",
                 "switch " + std::string(ParallelModeName(from)) + " -> " +
                     std::string(ParallelModeName(target)) + " " +
                     (rolled_back ? "failed, rolled back: " : "refused: ") + s.status().message(),
                 {{"from", std::string(ParallelModeName(from))},
                  {"to", std::string(ParallelModeName(target))},
                  {"error", s.status().message()},
                  {"rolled_back", rolled_back},
                  {"why", why}});
    return s.status();
  }
  json detail = StatsJson(*s);
  detail["why"] = why;
  detail["evicted_cache_pages"] = evicted;
  if (!rehome.is_null()) detail["rehome"] = rehome;
  if (s->layers > 0) {
    ++stats_.switches;
    PublishEvent("switch", "switch", "done",
                 "switched " + std::string(ParallelModeName(s->from)) + " -> " +
                     std::string(ParallelModeName(s->to)) + " in " + Fixed(s->total_ms) +
                     " ms: weights " + Fixed(s->weights_ms) + " ms (" + Fixed(s->gbps) +
                     " GB/s), state " + Fixed(s->state_ms) + " ms (" + std::to_string(s->kv_pages) +
                     " pages, " + std::to_string(s->state_slots) + " slots, " +
                     Fixed(s->state_gbps) + " GB/s), other " + Fixed(s->other_ms) + " ms",
                 detail);
    PublishMeta();  // the layout changed; late joiners and the header read it there
  }
  return detail;
}

bool Engine::CacheCanMakeRoom(ParallelMode target) const {
  return CacheCovers(runner_->LayoutOverflowPages(target));
}

bool Engine::CacheCovers(const std::vector<int>& over) const {
  for (size_t d = 0; d < over.size(); ++d) {
    if (over[d] > scheduler_->cache_stats(static_cast<int>(d)).tree.evictable_pages) return false;
  }
  return true;
}

int Engine::MakeRoomForLayout(ParallelMode target) {
  // Only when eviction is enough: a switch refused anyway keeps its cache.
  const std::vector<int> over = runner_->LayoutOverflowPages(target);
  if (!CacheCovers(over)) return 0;
  int evicted = 0;
  for (size_t d = 0; d < over.size(); ++d) {
    evicted += scheduler_->EvictCachePages(static_cast<int>(d), over[d]);
  }
  return evicted;
}

Result<json> Engine::RehomeForEp() {
  // On the serving clock, so a simulated re-homing reports simulated time.
  const int64_t t0_us = NowUs();
  const std::vector<RehomeItem> items = scheduler_->RehomeItems();
  const RehomePlan plan = LongestFirstAssignment(items, scheduler_->RehomeCapacities());
  std::vector<int64_t> before(runner_->devices(), 0);
  for (const RehomeItem& it : items) before[it.home] += it.pages;
  int moved = 0;
  int64_t moved_pages = 0;
  if (plan.fits && plan.moved > 0) {
    ASSIGN_OR_RETURN(std::vector<StateMove> moves, scheduler_->Rehome(plan.home));
    if (Status st = runner_->MoveRequestState(moves); !st.ok()) {
      return Internal("re-homing before the switch to EP: " + st.message());
    }
    moved = static_cast<int>(moves.size());
    for (const StateMove& m : moves) moved_pages += static_cast<int64_t>(m.to_pages.size());
  }
  std::vector<int64_t> after(runner_->devices(), 0);
  for (const RehomeItem& it : scheduler_->RehomeItems()) after[it.home] += it.pages;
  return json{{"requests", static_cast<int64_t>(items.size())},
              {"moved", moved},
              {"moved_pages", moved_pages},
              {"fits", plan.fits},
              {"pages_before", before},
              {"pages_after", after},
              {"ms", static_cast<double>(NowUs() - t0_us) / 1000.0}};
}

Result<json> Engine::SwitchCommand(const json& args) {
  std::optional<ParallelMode> target;
  std::optional<FaultPlan> fault;
  for (const auto& [key, value] : args.items()) {
    if (key == "to") {
      ASSIGN_OR_RETURN(ParallelMode m, ParseMode(value));
      target = m;
    } else if (key == "inject_fault" && value.is_object()) {
      FaultPlan f;
      f.layer = value.value("layer", 0);
      f.rank = value.value("rank", 0);
      ASSIGN_OR_RETURN(f.phase, ParsePhase(value.value("phase", json("permute"))));
      ASSIGN_OR_RETURN(f.part, ParsePart(value.value("part", json("weights"))));
      fault = f;
    } else {
      return InvalidArgument("switch: unknown or mistyped argument '" + key +
                             "' (to: \"tp\"|\"ep\")");
    }
  }
  if (!target) return InvalidArgument("switch: missing \"to\": \"tp\" or \"ep\"");
  return SwitchTo(*target, fault ? &*fault : nullptr, "command");
}

Result<json> Engine::PolicyCommand(const json& args) {
  std::string line;
  for (const auto& [key, value] : args.items()) {
    std::string v;
    if (value.is_string()) {
      v = value.get<std::string>();
    } else if (value.is_number_integer()) {
      v = std::to_string(value.get<int64_t>());
    } else if (value.is_number()) {
      v = Fixed(value.get<double>(), 4);
    } else {
      return InvalidArgument("policy: " + key + " must be a string or a number");
    }
    line += key + "=" + v + " ";
  }
  RETURN_IF_ERROR(policy_->ApplyCommand(line));
  if (!line.empty()) PublishMeta();  // the console draws the thresholds from meta
  return PolicyJson();
}

Result<json> Engine::CalibrateCommand(const json& args) {
  if (calibration_ && !calibration_->done()) {
    return FailedPrecondition("calibrate: a calibration is already running");
  }
  CalibrateRunOptions o;
  if (options_.sim) {
    // The simulated cluster's crossover lies at hundreds of requests (seed
    // 003: 128-256 on 8xH200), and TP's extra KV reads make it depend on the
    // context, so the defaults measure wider and longer than the CPU's.
    o.batches = {16, 32, 64, 128, 256, 512, 1024, 2048};
  }
  bool prompt_given = false;
  bool apply = false;
  for (const auto& [key, value] : args.items()) {
    if (key == "batches" && value.is_array()) {
      o.batches.clear();
      for (const json& b : value) {
        if (!b.is_number_integer()) return InvalidArgument("calibrate: batches are integers");
        o.batches.push_back(b.get<int>());
      }
    } else if (key == "steps" && value.is_number_integer()) {
      o.steps = value.get<int>();
    } else if (key == "prompt_len" && value.is_number_integer()) {
      o.prompt_len = value.get<int>();
      prompt_given = true;
    } else if (key == "apply" && value.is_boolean()) {
      apply = value.get<bool>();
    } else {
      return InvalidArgument("calibrate: unknown or mistyped argument '" + key +
                             "' (batches: [int], steps: int, prompt_len: int, apply: bool)");
    }
  }
  const int decode_steps = CalibrateDecodeTokens(o);
  if (options_.sim && !prompt_given) {
    o.prompt_len = std::max(1, std::min(512, options_.model.max_seq - decode_steps));
  }
  // Validate here so a bad request fails now, not in the background.
  RETURN_IF_ERROR(ValidateCalibrateOptions(o, options_.model.max_seq));
  // The measurement builds pools of its own for these requests; one that
  // needs more KV than the engine's own pools hold measures a load this
  // deployment cannot serve (and on the CPU would allocate that memory again).
  const int64_t need = static_cast<int64_t>(*std::max_element(o.batches.begin(), o.batches.end())) *
                       (o.prompt_len + decode_steps);
  const int64_t hold = static_cast<int64_t>(runner_->devices()) * runner_->kv_pool(0).num_pages() *
                       options_.runner.page_size;
  if (need > hold) {
    return InvalidArgument("calibrate: " + std::to_string(need) +
                           " tokens of KV (the largest batch x (prompt_len " +
                           std::to_string(o.prompt_len) + " + " + std::to_string(decode_steps) +
                           " decode steps)) exceed the " + std::to_string(hold) +
                           " this engine's pools hold; measure fewer or shorter requests");
  }
  LayoutBench bench =
      options_.sim ? SimLayoutBench(options_.model, *options_.sim) : CpuLayoutBench(options_.model);
  calibration_.reset();  // a finished, unpublished one is superseded
  calibration_ =
      std::make_unique<CalibrationRun>(std::move(bench), options_.model, options_.runner, o);
  calibration_apply_ = apply;
  json batches = o.batches;
  const std::string clock = options_.sim ? "simulated" : "wall";
  PublishEvent("calibrate", "calibrate", "started",
               "calibrating TP vs EP at batches " + batches.dump() + ", " +
                   std::to_string(o.steps) + " steps each, prompt " + std::to_string(o.prompt_len) +
                   " (" + clock + " time)",
               {{"batches", batches},
                {"steps", o.steps},
                {"prompt_len", o.prompt_len},
                {"clock", clock},
                {"apply", apply}});
  return json{{"started", true},  {"batches", batches},
              {"steps", o.steps}, {"prompt_len", o.prompt_len},
              {"clock", clock},   {"apply", apply}};
}

void Engine::PollCalibration() {
  if (!calibration_ || !calibration_->done()) return;
  const Result<Calibration>& r = calibration_->result();
  if (!r.ok()) {
    PublishEvent("calibrate", "calibrate", "failed", "calibrate: " + r.status().message(),
                 {{"error", r.status().message()}});
  } else {
    json detail = json::parse(CalibrationToJson(*r));
    detail["table"] = FormatCalibrationTable(*r);
    bool applied = false;
    if (calibration_apply_ && r->has_thresholds) {
      PolicyOptions p = policy_->options();
      p.t_high = r->t_high;
      p.t_low = r->t_low;
      applied = policy_->SetOptions(p).ok();
      if (applied) PublishMeta();
    }
    detail["applied"] = applied;
    PublishEvent("calibrate", "calibrate", "done",
                 r->summary + (applied ? " Applied to the policy." : ""), std::move(detail));
  }
  calibration_.reset();
}

void Engine::ObservePolicy() {
  PolicyObservation obs;
  obs.step = scheduler_->step();
  obs.running = scheduler_->running();
  obs.waiting = scheduler_->waiting();
  obs.prefill_tokens = scheduler_->pending_prefill_tokens();
  obs.layout = ToPolicy(runner_->parallel_mode());
  obs.transition_in_progress = applier_ && applier_->busy();
  // Seed 003 §7.1: the other layout must hold every resident request's KV
  // (the sim's TP replicates KV heads when they are fewer than the devices).
  // Unpinned prefix-cache pages do not count: SwitchTo evicts them first.
  const ParallelMode other =
      obs.layout == PolicyLayout::kTp ? ParallelMode::kEP : ParallelMode::kTP;
  obs.other_layout_fits = runner_->CheckLayoutCapacity(other).ok() || CacheCanMakeRoom(other);
  obs.rollout = options_.workload.kind == WorkloadKind::kRollout;
  const Decision d = policy_->Observe(obs);
  last_decision_ = d;
  if (!d.repeat && d.mode == PolicyMode::kAuto) {
    PublishEvent("policy", "decision", "", d.reason,
                 {{"action", std::string(SwitchActionName(d.action))},
                  {"why", std::string(WhyName(d.why))},
                  {"step", d.step},
                  {"layout", std::string(PolicyLayoutName(d.layout))},
                  {"batch", d.batch},
                  {"waiting", d.waiting},
                  {"mean", d.mean},
                  {"median", d.median},
                  {"window", d.window},
                  {"t_high", d.t_high},
                  {"t_low", d.t_low},
                  {"cooldown_left", d.cooldown_left},
                  {"rollout", d.rollout}});
  }
  if (d.action == SwitchAction::kNone) return;
  const ParallelMode target =
      d.action == SwitchAction::kSwitchToTp ? ParallelMode::kTP : ParallelMode::kEP;
  Result<json> r = SwitchTo(target, nullptr, "policy: " + d.reason);
  if (!r.ok()) spdlog::warn("policy switch: {}", r.status().ToString());
}

}  // namespace sy::engine
