// File: telemetry/control.h
//
// Operator commands over ZeroMQ (ZeroMQ guide: ROUTER for the server, REQ or
// DEALER for clients).
//
// ControlServer (engine): a ROUTER socket. Serve() is non-blocking: it answers
// up to `max` pending requests by calling `handler` and returns. A request it
// cannot decode gets an INVALID_ARGUMENT reply without reaching the handler.
// Both REQ clients ([identity][empty][body]) and DEALER clients that send the
// empty delimiter frame are supported; a message with no delimiter is answered
// in the same shape it came in.
//
// With CURVE (ControlServerOptions::curve) only allow-listed keys connect,
// and each request reaches the handler with request.user_id set to the
// sender's ZAP User-Id ("operator:alice"); what a role may run is the
// handler's decision (telemetry/access.h, Authorize).
//
// ControlClient (console): a DEALER socket that sends the empty delimiter a
// REQ would. Call() waits up to `timeout` for the reply with the matching id;
// a late reply to an earlier timed-out call is discarded. UNAVAILABLE on
// timeout.
//
// Thread-safety: each object is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "telemetry/curve.h"
#include "telemetry/protocol.h"

namespace sy::telemetry {

using CommandHandler = std::function<CommandReply(const CommandRequest&)>;

// Request bodies above this size are refused with INVALID_ARGUMENT unread:
// commands are small, and the limit keeps a confused peer from growing memory.
inline constexpr size_t kMaxRequestBytes = size_t{1} << 20;

struct ControlServerOptions {
  std::string endpoint = "tcp://127.0.0.1:5556";
  // Required to bind beyond loopback (telemetry/curve.h).
  std::optional<CurveServer> curve = std::nullopt;
};

class ControlServer {
 public:
  // UNAVAILABLE if the endpoint cannot be bound; FAILED_PRECONDITION for an
  // endpoint beyond loopback without curve; INVALID_ARGUMENT for a bad key.
  static Result<std::unique_ptr<ControlServer>> Bind(const ControlServerOptions& options);
  // Bind({endpoint}): no CURVE, so loopback or ipc:// only.
  static Result<std::unique_ptr<ControlServer>> Bind(const std::string& endpoint);
  ~ControlServer();
  // The bound endpoint with any wildcard port resolved.
  const std::string& endpoint() const;
  // Returns how many requests were answered (malformed ones included).
  int Serve(const CommandHandler& handler, int max = 16);
  // Like Serve, but waits up to `timeout` for the first request.
  int ServeFor(const CommandHandler& handler, std::chrono::milliseconds timeout, int max = 16);

  class Impl;

 private:
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class ControlClient {
 public:
  // `curve`: this client's keys and the server's public key, for an engine
  // that requires CURVE. A key the engine refuses makes every Call time out
  // with UNAVAILABLE (ZeroMQ does not tell the client why).
  static Result<std::unique_ptr<ControlClient>> Connect(
      const std::string& endpoint, std::optional<CurveClient> curve = std::nullopt);
  ~ControlClient();
  // Fills request.id with a fresh number when it is null.
  Result<CommandReply> Call(CommandRequest request, std::chrono::milliseconds timeout);

  class Impl;

 private:
  explicit ControlClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::telemetry
