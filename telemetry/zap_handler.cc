#include "telemetry/zap_handler.h"

#include <array>
#include <chrono>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>
#include <zmq_addon.hpp>

namespace sy::telemetry {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// Handshakes that fail before ZAP is consulted: a wrong mechanism (no
// CURVE) or a CURVE error (wrong server key). HANDSHAKE_FAILED_AUTH is left
// out (those are ZAP's own refusals, reported by Answer()), and so is
// HANDSHAKE_FAILED_NO_DETAIL, which is mostly a peer that hung up mid-way.
constexpr int kMonitorEvents = ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ProtocolErrorText(uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "security mechanism mismatch (a client without CURVE keys?)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "CURVE cryptographic error (a client with the wrong server public key?)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND:
    case ZMQ_PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE:
      return "ZMTP handshake out of order";
    default:
      return "ZMTP handshake protocol error " + std::to_string(code);
  }
}

Status SetKey(zmq::socket_t& sock, int option, const std::string& key, std::string_view what) {
  RETURN_IF_ERROR(ValidateZ85Key(key, what));
  if (zmq_setsockopt(sock.handle(), option, key.data(), key.size()) != 0) {
    return InvalidArgument(std::string(what) + ": " + zmq_strerror(zmq_errno()));
  }
  return Status::Ok();
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& ctx, std::string socket_name, const CurveServer& curve)
    : socket_name_(std::move(socket_name)),
      curve_(curve),
      rep_(ctx, zmq::socket_type::rep),
      stop_rx_(ctx, zmq::socket_type::pair),
      monitor_(ctx, zmq::socket_type::pair),
      stop_tx_(ctx, zmq::socket_type::pair) {}

Result<std::unique_ptr<ZapHandler>> ZapHandler::Start(zmq::context_t& ctx, zmq::socket_t& secured,
                                                      std::string socket_name,
                                                      const CurveServer& curve) {
  if (!curve.allow) return InvalidArgument("CURVE server without an allow-list");
  std::unique_ptr<ZapHandler> h;
  try {
    h.reset(new ZapHandler(ctx, std::move(socket_name), curve));
    for (zmq::socket_t* s : {&h->rep_, &h->stop_rx_, &h->monitor_, &h->stop_tx_}) {
      s->set(zmq::sockopt::linger, 0);
    }
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot create the ZAP handler's sockets: ") + e.what());
  }
  try {
    h->rep_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return FailedPrecondition(std::string("cannot bind the ZAP handler (") + kZapEndpoint +
                              "): " + e.what());
  }
  // Unique per handler: inproc names are per context, and the address of a
  // live object is unique among live objects.
  const std::string id = std::to_string(reinterpret_cast<uintptr_t>(h.get()));
  const std::string stop_ep = "inproc://sy-zap-stop-" + id;
  const std::string monitor_ep = "inproc://sy-zap-monitor-" + id;
  try {
    h->stop_rx_.bind(stop_ep);
    h->stop_tx_.connect(stop_ep);
    if (zmq_socket_monitor(secured.handle(), monitor_ep.c_str(), kMonitorEvents) != 0) {
      return Unavailable(std::string("cannot monitor the secured socket: ") +
                         zmq_strerror(zmq_errno()));
    }
    h->monitor_.connect(monitor_ep);
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot wire the ZAP handler: ") + e.what());
  }
  ZapHandler* self = h.get();
  h->thread_ = std::thread([self] { self->Run(); });
  return h;
}

ZapHandler::~ZapHandler() {
  if (thread_.joinable()) {
    try {
      stop_tx_.send(zmq::message_t(), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
    }
    thread_.join();
  }
}

void ZapHandler::Run() {
  for (;;) {
    std::array<zmq_pollitem_t, 3> items{{{stop_rx_.handle(), 0, ZMQ_POLLIN, 0},
                                         {rep_.handle(), 0, ZMQ_POLLIN, 0},
                                         {monitor_.handle(), 0, ZMQ_POLLIN, 0}}};
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return;  // the context is terminating
    }
    if (items[0].revents & ZMQ_POLLIN) return;
    try {
      if (items[1].revents & ZMQ_POLLIN) Answer();
      if (items[2].revents & ZMQ_POLLIN) OnMonitorEvent();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
    }
  }
}

// RFC 27: [version, request id, domain, address, identity, mechanism,
// credentials...] -> [version, request id, status code, status text,
// user id, metadata]. The REP socket keeps the envelope.
void ZapHandler::Answer() {
  std::vector<zmq::message_t> req;
  if (!zmq::recv_multipart(rep_, std::back_inserter(req), zmq::recv_flags::dontwait)) return;
  std::string request_id = req.size() > 1 ? req[1].to_string() : "";
  std::string code = "400", text, user_id;
  AuthRefusal refusal{.socket = socket_name_,
                      .peer_address = req.size() > 3 ? req[3].to_string() : "",
                      .public_key = "",
                      .mechanism = req.size() > 5 ? req[5].to_string() : "",
                      .reason = "",
                      .repeats = 0};
  if (req.size() < 6 || req[0].to_string_view() != "1.0") {
    code = "500";
    text = "malformed ZAP request";
  } else if (req[2].to_string_view() != curve_.zap_domain) {
    text = "unknown ZAP domain '" + req[2].to_string() + "'";
  } else if (refusal.mechanism != "CURVE") {
    text = "mechanism " + refusal.mechanism + " is not allowed; CURVE keys are required";
  } else if (req.size() != 7 || req[6].size() != kCurveKeyBytes) {
    text = "malformed CURVE credentials";
  } else {
    std::array<char, kCurveKeyZ85Chars + 1> z85{};
    zmq_z85_encode(z85.data(), static_cast<const uint8_t*>(req[6].data()), kCurveKeyBytes);
    refusal.public_key = z85.data();
    if (const AuthorizedKey* k = curve_.allow->Find(refusal.public_key)) {
      code = "200";
      text = "OK";
      user_id = UserIdFor(*k);
    } else {
      text = "public key is not in the allow-list";
    }
  }
  std::array<zmq::message_t, 6> reply{zmq::message_t(std::string_view("1.0")),
                                      zmq::message_t(request_id),
                                      zmq::message_t(code),
                                      zmq::message_t(text),
                                      zmq::message_t(user_id),
                                      zmq::message_t()};
  zmq::send_multipart(rep_, reply, zmq::send_flags::dontwait);
  if (code == "200") {
    ++admitted_;
  } else {
    refusal.reason = text;
    Refuse(std::move(refusal));
  }
}

void ZapHandler::OnMonitorEvent() {
  std::vector<zmq::message_t> ev;
  if (!zmq::recv_multipart(monitor_, std::back_inserter(ev), zmq::recv_flags::dontwait)) return;
  if (ev.size() < 2 || ev[0].size() < 6) return;
  uint16_t event = 0;
  uint32_t value = 0;
  std::memcpy(&event, ev[0].data(), sizeof event);
  std::memcpy(&value, static_cast<const char*>(ev[0].data()) + 2, sizeof value);
  if ((event & kMonitorEvents) == 0) return;
  const std::string reason = ProtocolErrorText(value);
  // libzmq names the bound endpoint here, not the peer.
  Refuse(AuthRefusal{.socket = socket_name_,
                     .peer_address = "unknown peer on " + ev[1].to_string(),
                     .public_key = "",
                     .mechanism = "",
                     .reason = reason,
                     .repeats = 0});
}

void ZapHandler::Refuse(AuthRefusal refusal) {
  ++refused_;
  if (curve_.refusals) curve_.refusals->Push(std::move(refusal), SteadyMs());
}

Status ApplyCurveServer(zmq::socket_t& sock, const CurveServer& curve) {
  if (!CurveAvailable()) return Unavailable("this libzmq was built without CURVE (libsodium)");
  RETURN_IF_ERROR(SetKey(sock, ZMQ_CURVE_SECRETKEY, curve.secret_key, "server secret key"));
  try {
    sock.set(zmq::sockopt::curve_server, 1);
    sock.set(zmq::sockopt::zap_domain, curve.zap_domain);
  } catch (const zmq::error_t& e) {
    return InvalidArgument(std::string("cannot make a CURVE server socket: ") + e.what());
  }
  return Status::Ok();
}

Status ApplyCurveClient(zmq::socket_t& sock, const CurveClient& curve) {
  if (!CurveAvailable()) return Unavailable("this libzmq was built without CURVE (libsodium)");
  RETURN_IF_ERROR(SetKey(sock, ZMQ_CURVE_SERVERKEY, curve.server_public_key, "server public key"));
  RETURN_IF_ERROR(SetKey(sock, ZMQ_CURVE_PUBLICKEY, curve.public_key, "client public key"));
  RETURN_IF_ERROR(SetKey(sock, ZMQ_CURVE_SECRETKEY, curve.secret_key, "client secret key"));
  return Status::Ok();
}

std::string UserIdOf(zmq::message_t& frame) {
  const char* uid = zmq_msg_gets(frame.handle(), "User-Id");
  return uid != nullptr ? std::string(uid) : std::string();
}

}  // namespace sy::telemetry
