// File: telemetry/zap_handler.h
//
// The server half of CURVE on one ZeroMQ socket (internal to telemetry/;
// Publisher and ControlServer use it, nothing else needs cppzmq types).
//
// ZapHandler answers ZeroMQ's authentication requests (ZAP, RFC 27) for one
// context: a REP socket bound to inproc://zeromq.zap.01, on its own thread.
// A CURVE client whose public key is in the allow-list is admitted with the
// User-Id UserIdFor(key) ("observer:dashboard"); every other request is
// refused (400) and reported to CurveServer::refusals. It also watches the
// secured socket's monitor for handshakes that fail before ZAP is asked (a
// client without CURVE, or one with the wrong server key) and reports those
// too. libzmq admits any CURVE client when no ZAP handler is bound, so the
// handler must be started before the secured socket binds and must outlive
// it: declare it after the context and before the socket.
//
//   zmq::context_t ctx; std::unique_ptr<ZapHandler> zap; zmq::socket_t sock(ctx, ...);
//   ASSIGN_OR_RETURN(zap, ZapHandler::Start(ctx, sock, "telemetry", curve));
//   RETURN_IF_ERROR(ApplyCurveServer(sock, curve));
//   sock.bind(endpoint);
//
// Thread-safety: Start and the destructor on the owner's thread; the counters
// from any thread. The handler thread never blocks on anything but its poll:
// refusals go to a RefusalLog, which never waits for its consumer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "base/status.h"
#include "telemetry/curve.h"

namespace sy::telemetry {

class ZapHandler {
 public:
  // Binds the ZAP endpoint in `ctx`, starts monitoring `secured` for failed
  // handshakes, and starts the thread. FAILED_PRECONDITION if `ctx` already
  // has a ZAP handler; INVALID_ARGUMENT if curve.allow is null.
  // `socket_name` labels refusals ("telemetry", "control").
  static Result<std::unique_ptr<ZapHandler>> Start(zmq::context_t& ctx, zmq::socket_t& secured,
                                                   std::string socket_name,
                                                   const CurveServer& curve);
  // Wakes the thread, joins it, closes its sockets. Promptly: no timeouts.
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  int64_t admitted() const { return admitted_.load(); }
  int64_t refused() const { return refused_.load(); }

 private:
  ZapHandler(zmq::context_t& ctx, std::string socket_name, const CurveServer& curve);
  void Run();
  void Answer();
  void OnMonitorEvent();
  void Refuse(AuthRefusal refusal);

  const std::string socket_name_;
  const CurveServer curve_;
  // Used only by thread_ once it runs (created on the owner's thread; thread
  // creation is the hand-over barrier).
  zmq::socket_t rep_;
  zmq::socket_t stop_rx_;
  zmq::socket_t monitor_;
  zmq::socket_t stop_tx_;  // the owner's end of the wake-up pipe
  std::atomic<int64_t> admitted_{0};
  std::atomic<int64_t> refused_{0};
  std::thread thread_;
};

// Makes `sock` a CURVE server with curve.secret_key and curve.zap_domain.
// INVALID_ARGUMENT for a bad key. REQUIRES: before bind.
Status ApplyCurveServer(zmq::socket_t& sock, const CurveServer& curve);
// Makes `sock` a CURVE client. INVALID_ARGUMENT for a bad key; UNAVAILABLE
// when libzmq has no CURVE. REQUIRES: before connect.
Status ApplyCurveClient(zmq::socket_t& sock, const CurveClient& curve);
// The ZAP User-Id a received frame carries ("" when the socket has no ZAP).
std::string UserIdOf(zmq::message_t& frame);

}  // namespace sy::telemetry
