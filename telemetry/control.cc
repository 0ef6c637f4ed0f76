#include "telemetry/control.h"

#include <iterator>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "telemetry/zap_handler.h"

namespace sy::telemetry {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Best effort: echo the id of a request that fails to decode, so a client
// that matches replies by id still gets its answer.
json SalvageId(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("id")) return j["id"];
  return json();
}

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

// ---- ControlServer ----

class ControlServer::Impl {
 public:
  Impl() : ctx_(1), sock_(ctx_, zmq::socket_type::router) {}

  Status Bind(const std::string& endpoint, const std::optional<CurveServer>& curve) {
    if (curve) {
      ASSIGN_OR_RETURN(zap_, ZapHandler::Start(ctx_, sock_, "control", *curve));
      RETURN_IF_ERROR(ApplyCurveServer(sock_, *curve));
    }
    try {
      // Replies to a client that has gone away must not delay shutdown.
      sock_.set(zmq::sockopt::linger, 0);
      sock_.bind(endpoint);
      endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      return Unavailable("cannot bind control ROUTER socket to '" + endpoint + "': " + e.what());
    }
    return Status::Ok();
  }

  int Serve(const CommandHandler& handler, int max) {
    int answered = 0;
    while (answered < max) {
      std::vector<zmq::message_t> frames;
      try {
        if (!zmq::recv_multipart(sock_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
          break;
        }
      } catch (const zmq::error_t&) {
        break;  // EINTR or a closing context: the caller's next Serve retries.
      }
      Answer(frames, handler);
      ++answered;
    }
    return answered;
  }

  int ServeFor(const CommandHandler& handler, std::chrono::milliseconds timeout, int max) {
    try {
      zmq_pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, timeout) == 0) return 0;
    } catch (const zmq::error_t&) {
      return 0;
    }
    return Serve(handler, max);
  }

  const std::string& endpoint() const { return endpoint_; }

 private:
  // frames[0] is the peer identity ROUTER prepends. A REQ client (or a DEALER
  // imitating one) puts an empty delimiter before the body; a bare DEALER
  // does not. The reply goes back with the same envelope either way.
  void Answer(std::vector<zmq::message_t>& frames, const CommandHandler& handler) {
    size_t body_at = 1;
    for (size_t i = 1; i < frames.size(); ++i) {
      if (frames[i].size() == 0) {
        body_at = i + 1;
        break;
      }
    }
    const size_t body_frames = frames.size() - std::min(body_at, frames.size());
    CommandReply reply;
    if (body_frames != 1) {
      reply = ErrorReply(nullptr, InvalidArgument("request must be exactly one frame after the "
                                                  "envelope, got " +
                                                  std::to_string(body_frames)));
    } else if (frames[body_at].size() > kMaxRequestBytes) {
      reply = ErrorReply(
          nullptr, InvalidArgument("request body is " + std::to_string(frames[body_at].size()) +
                                   " bytes, the limit is " + std::to_string(kMaxRequestBytes)));
    } else {
      reply = Handle(frames[body_at].to_string_view(), UserIdOf(frames[body_at]), handler);
    }
    std::string body = EncodeReply(reply);
    try {
      for (size_t i = 0; i < std::min(body_at, frames.size()); ++i) {
        sock_.send(frames[i], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      }
      // ROUTER drops a reply to a vanished peer silently; nothing to do then.
      (void)sock_.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
    }
  }

  static CommandReply Handle(std::string_view body, std::string user_id,
                             const CommandHandler& handler) {
    Result<CommandRequest> req = DecodeRequest(body);
    if (!req.ok()) return ErrorReply(SalvageId(body), req.status());
    req->user_id = std::move(user_id);
    CommandReply reply;
    try {
      reply = handler(*req);
    } catch (const std::exception& e) {
      reply = ErrorReply(req->id, Internal("command '" + req->cmd + "' failed: " + e.what()));
    } catch (...) {
      reply = ErrorReply(req->id, Internal("command '" + req->cmd + "' failed: unknown exception"));
    }
    reply.id = req->id;  // clients match on it; never trust a handler to copy it
    return reply;
  }

  // Declared before sock_ so the socket closes before the context terminates,
  // and the ZAP handler (when CURVE is on) outlives the socket it guards.
  zmq::context_t ctx_;
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t sock_;
  std::string endpoint_;
};

Result<std::unique_ptr<ControlServer>> ControlServer::Bind(const std::string& endpoint) {
  return Bind(ControlServerOptions{.endpoint = endpoint, .curve = std::nullopt});
}

Result<std::unique_ptr<ControlServer>> ControlServer::Bind(const ControlServerOptions& options) {
  RETURN_IF_ERROR(
      CheckBindSecurity("control ROUTER socket", options.endpoint, options.curve.has_value()));
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>();
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot create control ROUTER socket: ") + e.what());
  }
  RETURN_IF_ERROR(impl->Bind(options.endpoint, options.curve));
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControlServer::~ControlServer() = default;
const std::string& ControlServer::endpoint() const { return impl_->endpoint(); }
int ControlServer::Serve(const CommandHandler& handler, int max) {
  return impl_->Serve(handler, max);
}
int ControlServer::ServeFor(const CommandHandler& handler, std::chrono::milliseconds timeout,
                            int max) {
  return impl_->ServeFor(handler, timeout, max);
}

// ---- ControlClient ----

class ControlClient::Impl {
 public:
  explicit Impl(std::string endpoint)
      : endpoint_(std::move(endpoint)), ctx_(1), sock_(ctx_, zmq::socket_type::dealer) {}

  Status Connect(const std::optional<CurveClient>& curve) {
    if (curve) RETURN_IF_ERROR(ApplyCurveClient(sock_, *curve));
    try {
      sock_.set(zmq::sockopt::linger, 0);
      // Queue only to a live connection: a request must not sit in a buffer
      // and be executed long after its caller gave up on it.
      sock_.set(zmq::sockopt::immediate, 1);
      sock_.connect(endpoint_);
    } catch (const zmq::error_t& e) {
      return InvalidArgument("cannot connect control DEALER socket to '" + endpoint_ +
                             "': " + e.what());
    }
    return Status::Ok();
  }

  Result<CommandReply> Call(CommandRequest request, std::chrono::milliseconds timeout) {
    if (request.id.is_null()) request.id = next_id_++;
    const auto deadline = Clock::now() + timeout;
    const std::string what = "'" + request.cmd + "' (id " + request.id.dump() + ") to " +
                             endpoint_ + " within " + Millis(timeout);
    try {
      if (!WaitFor(ZMQ_POLLOUT, deadline)) return Unavailable("could not send " + what);
      std::string body = EncodeRequest(request);
      if (!sock_.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
          !sock_.send(zmq::buffer(body), zmq::send_flags::dontwait)) {
        return Unavailable("could not send " + what);
      }
      while (WaitFor(ZMQ_POLLIN, deadline)) {
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(sock_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
          continue;
        }
        size_t first = 0;
        while (first < frames.size() && frames[first].size() == 0) ++first;
        if (frames.size() - first != 1) continue;  // not a reply shape we sent for
        Result<CommandReply> reply = DecodeReply(frames[first].to_string_view());
        // A reply to an earlier, timed-out call (or garbage) is not ours.
        if (!reply.ok() || reply->id != request.id) continue;
        return reply;
      }
    } catch (const zmq::error_t& e) {
      return Unavailable("control call " + what + " failed: " + e.what());
    }
    return Unavailable("no reply to " + what);
  }

 private:
  bool WaitFor(short events, Clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() < 0) left = std::chrono::milliseconds(0);
      zmq_pollitem_t item{sock_.handle(), 0, events, 0};
      try {
        if (zmq::poll(&item, 1, left) > 0) return true;
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
      if (left.count() == 0) return false;
    }
  }

  const std::string endpoint_;
  int64_t next_id_ = 1;
  // Declared before sock_ so the socket closes before the context terminates.
  zmq::context_t ctx_;
  zmq::socket_t sock_;
};

Result<std::unique_ptr<ControlClient>> ControlClient::Connect(const std::string& endpoint,
                                                              std::optional<CurveClient> curve) {
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(endpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot create control DEALER socket: ") + e.what());
  }
  RETURN_IF_ERROR(impl->Connect(curve));
  return std::unique_ptr<ControlClient>(new ControlClient(std::move(impl)));
}

ControlClient::ControlClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControlClient::~ControlClient() = default;
Result<CommandReply> ControlClient::Call(CommandRequest request,
                                         std::chrono::milliseconds timeout) {
  return impl_->Call(std::move(request), timeout);
}

}  // namespace sy::telemetry
