// File: engine/server/commands.cc
//
// The Engine's command handlers. Each runs between steps on the loop thread,
// validates everything before changing anything, and never throws: a JSON
// exception from a hand-crafted request becomes an error reply.
#include <spdlog/spdlog.h>

#include <string>

#include "engine/server/engine.h"

namespace sy::engine {
namespace {

using nlohmann::json;

std::string KnownCommands() {
  std::string s;
  for (std::string_view c : telemetry::kCommands) {
    if (!s.empty()) s += ", ";
    s += c;
  }
  return s;
}

}  // namespace

json Engine::DescribeJson() const {
  json j = telemetry::ToJson(BuildMeta());
  // docs/PROTOCOL.md 7.4: the meta body without the stream envelope, plus the
  // per-device pool geometry (the same on every device).
  for (const char* field : {"v", "run", "seq", "t"}) j.erase(field);
  const KvPool& kv = runner_->kv_pool(0);
  const StatePool& state = runner_->state_pool(0);
  j["pools"] = {
      {"kv_pages_per_device", kv.num_pages()},  {"kv_page_bytes", kv.page_bytes()},
      {"kv_bytes_per_device", kv.bytes()},      {"state_slots_per_device", state.slots()},
      {"state_slot_bytes", state.slot_bytes()}, {"state_bytes_per_device", state.bytes()}};
  return j;
}

namespace {

json PoolsJson(const std::vector<telemetry::DeviceOccupancy>& devices) {
  json out = json::array();
  for (const telemetry::DeviceOccupancy& d : devices) {
    out.push_back({{"device", d.device},
                   {"running", d.running},
                   {"kv_pages_used", d.kv_pages_used},
                   {"kv_pages_total", d.kv_pages_total},
                   {"kv_bytes_used", d.kv_bytes_used},
                   {"kv_bytes_total", d.kv_bytes_total},
                   {"state_slots_used", d.state_slots_used},
                   {"state_slots_total", d.state_slots_total},
                   {"state_bytes_used", d.state_bytes_used},
                   {"state_bytes_total", d.state_bytes_total},
                   {"cache_tokens", d.cache_tokens},
                   {"cache_nodes", d.cache_nodes},
                   {"cache_slots", d.cache_slots},
                   {"cache_hit_rate", d.cache_hit_rate},
                   {"cache_evicted_pages", d.cache_evicted_pages}});
  }
  return out;
}

}  // namespace

json Engine::StatusJson() const {
  return {{"state", StateName()},
          {"step", scheduler_->step()},
          {"running", scheduler_->running()},
          {"waiting", scheduler_->waiting()},
          {"finished", scheduler_->finished_total()},
          {"generated", scheduler_->generated_total()},
          {"cancelled", scheduler_->cancelled_total()},
          {"preempted", scheduler_->preempted_total()},
          {"prefix_cache", scheduler_->prefix_cache()},
          {"trace_level", std::string(TraceLevelName(trace_level_))},
          {"layout", std::string(ParallelModeName(runner_->parallel_mode()))},
          {"policy", PolicyJson()},
          {"switches", stats_.switches},
          {"dropped_total", publisher_->counters().dropped_total},
          {"uptime_us", NowUs()},
          {"pools", PoolsJson(PoolOccupancy())}};
}

Result<json> Engine::Execute(const telemetry::CommandRequest& req) {
  const std::string& cmd = req.cmd;
  if (stopping_ && (cmd == "pause" || cmd == "resume" || cmd == "trace")) {
    return FailedPrecondition(cmd + ": the engine is stopping");
  }
  if (cmd == "describe") return DescribeJson();
  if (cmd == "status") return StatusJson();
  if (cmd == "pause" || cmd == "resume") {
    const bool pause = cmd == "pause";
    if (paused_ != pause) {
      paused_ = pause;
      publisher_->SetState(StateName(), scheduler_->step());
      PublishMeta();
    }
    return json{{"state", StateName()}};
  }
  if (cmd == "trace") {
    auto it = req.args.find("level");
    if (it == req.args.end() || !it->is_string()) {
      return InvalidArgument(R"(trace: args.level must be "off", "summary" or "full")");
    }
    Result<TraceLevel> parsed = ParseTraceLevel(it->get<std::string>());
    if (!parsed.ok()) return parsed.status().WithContext("trace");
    const TraceLevel level = *parsed;
    const TraceLevel previous = trace_level_;
    if (level != previous) {
      trace_level_ = level;
      PublishMeta();
    }
    return json{{"level", std::string(TraceLevelName(level))},
                {"previous", std::string(TraceLevelName(previous))}};
  }
  if (cmd == "cancel") return CancelCommand(req.args);
  if (cmd == "expert_stats") return ExpertStatsCommand(req.args);
  if (cmd == "rebalance") return RebalanceCommand(req.args);
  if (cmd == "rebalance_auto") return RebalanceAutoCommand(req.args);
  if (cmd == "switch") return SwitchCommand(req.args);
  if (cmd == "policy") return PolicyCommand(req.args);
  if (cmd == "calibrate") return CalibrateCommand(req.args);
  if (cmd == "flush_cache") {
    return json{{"freed_pages", scheduler_->FlushCache()}};
  }
  if (cmd == "stop") {
    stopping_ = true;
    return json{{"state", StateName()}};
  }
  return NotFound("unknown command '" + cmd + "'; known: " + KnownCommands());
}

Result<json> Engine::ExpertStatsCommand(const json& args) {
  if (!expert_stats_) return FailedPrecondition("expert_stats: the model has no routed experts");
  int window = 100, top = 10;
  std::string path;
  for (const auto& [key, value] : args.items()) {
    if (key == "window" && value.is_number_integer()) {
      window = value.get<int>();
    } else if (key == "top" && value.is_number_integer()) {
      top = value.get<int>();
    } else if (key == "path" && value.is_string()) {
      path = value.get<std::string>();
    } else {
      return InvalidArgument("expert_stats: unknown or mistyped argument '" + key +
                             "' (window: int, top: int, path: string)");
    }
  }
  const int cap = expert_stats_->capacity();
  if (window < 0 || window > cap) {
    return InvalidArgument("expert_stats: window must be in [0, " + std::to_string(cap) +
                           "] steps (0: since the start), got " + std::to_string(window));
  }
  if (top < 0 || top > 1000) return InvalidArgument("expert_stats: top must be in [0, 1000]");
  ASSIGN_OR_RETURN(eplb::Balancedness b, expert_stats_->WindowBalancedness(window, *placement_));
  ASSIGN_OR_RETURN(std::vector<eplb::HotExpert> hot, expert_stats_->Hottest(window, top));
  json hottest = json::array();
  for (const eplb::HotExpert& h : hot) {
    hottest.push_back(
        {{"layer", h.layer}, {"expert", h.expert}, {"tokens", h.tokens}, {"share", h.share}});
  }
  json result = {{"window", window},
                 {"window_steps", expert_stats_->WindowSteps(window)},
                 {"balancedness", b.per_layer},
                 {"balancedness_mean", b.mean},
                 {"hottest", std::move(hottest)}};
  if (!path.empty()) {
    RETURN_IF_ERROR(
        expert_stats_->DumpJson(path, window, *placement_, top).WithContext("expert_stats"));
    result["path"] = path;
  }
  return result;
}

telemetry::CommandReply Engine::HandleCommand(const telemetry::CommandRequest& req) {
  json detail = {{"id", req.id}, {"args", req.args}};
  PublishEvent("command", req.cmd, "received", req.cmd + " received", detail);
  Result<json> result = Internal("command handler did not run");
  try {
    result = Execute(req);
  } catch (const std::exception& e) {
    result = Internal("command '" + req.cmd + "' failed: " + e.what());
  }
  if (result.ok()) {
    detail["result"] = *result;
    PublishEvent("command", req.cmd, "done", req.cmd + " done", std::move(detail));
    spdlog::info("command {} done", req.cmd);
    return telemetry::OkReply(req.id, std::move(result).value());
  }
  const Status& s = result.status();
  detail["error"] = {{"code", std::string(StatusCodeName(s.code()))}, {"message", s.message()}};
  PublishEvent("command", req.cmd, "failed", req.cmd + " failed: " + s.ToString(),
               std::move(detail));
  spdlog::warn("command {} failed: {}", req.cmd, s.ToString());
  return telemetry::ErrorReply(req.id, s);
}

}  // namespace sy::engine
