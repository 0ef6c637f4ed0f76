// File: engine/server/engine_security.cc
//
// The Engine's side of CURVE (docs/PROTOCOL.md, "Security"): one refusal
// log for both sockets' ZAP handlers, the role check in front of every
// command, and the events that make refusals visible on the stream.
#include <spdlog/spdlog.h>

#include <memory>

#include "engine/server/engine.h"
#include "telemetry/access.h"

namespace sy::engine {

void Engine::SetUpSecurity() {
  if (!options_.curve) return;
  refusals_ = std::make_shared<telemetry::RefusalLog>();
  options_.curve->refusals = refusals_;
  options_.publisher.curve = options_.curve;
}

telemetry::CommandReply Engine::HandleAuthorized(const telemetry::CommandRequest& req) {
  const Status allowed = telemetry::Authorize(options_.curve.has_value(), req);
  if (allowed.ok()) return HandleCommand(req);
  spdlog::warn("command {} from '{}' refused: {}", req.cmd, req.user_id, allowed.message());
  PublishEvent(
      "security", "command_refused", "",
      req.cmd + " refused for '" + req.user_id + "': " + allowed.ToString(),
      {{"id", req.id},
       {"cmd", req.cmd},
       {"args", req.args},
       {"user", req.user_id},
       {"error",
        {{"code", std::string(StatusCodeName(allowed.code()))}, {"message", allowed.message()}}}});
  return telemetry::ErrorReply(req.id, allowed);
}

void Engine::PublishRefusals() {
  if (!refusals_) return;
  for (telemetry::AuthRefusal& r : refusals_->Drain()) {
    const std::string who =
        r.public_key.empty() ? r.peer_address : r.peer_address + " key " + r.public_key;
    std::string message = r.socket + " connection refused (" + who + "): " + r.reason;
    if (r.repeats > 0) message += " (+" + std::to_string(r.repeats) + " more since the last)";
    spdlog::warn("{}", message);
    PublishEvent("security", "connection_refused", "", std::move(message),
                 {{"socket", r.socket},
                  {"peer", r.peer_address},
                  {"public_key", r.public_key},
                  {"mechanism", r.mechanism},
                  {"reason", r.reason},
                  {"repeats", r.repeats}});
  }
}

}  // namespace sy::engine
