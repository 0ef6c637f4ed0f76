#include "telemetry/subscriber.h"

#include <iterator>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "telemetry/zap_handler.h"

namespace sy::telemetry {

class Subscriber::Impl {
 public:
  Impl() : ctx_(1), sock_(ctx_, zmq::socket_type::sub) {}

  Status Connect(const SubscriberOptions& options) {
    if (options.curve) RETURN_IF_ERROR(ApplyCurveClient(sock_, *options.curve));
    try {
      sock_.set(zmq::sockopt::linger, 0);
      sock_.set(zmq::sockopt::rcvhwm, options.rcvhwm);
      sock_.set(zmq::sockopt::subscribe, "");
      sock_.connect(options.endpoint);
    } catch (const zmq::error_t& e) {
      return InvalidArgument("cannot connect telemetry SUB socket to '" + options.endpoint +
                             "': " + e.what());
    }
    return Status::Ok();
  }

  Result<std::optional<Message>> Receive(std::chrono::milliseconds timeout) {
    std::vector<zmq::message_t> frames;
    try {
      zmq_pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, timeout) == 0) return std::optional<Message>();
      if (!zmq::recv_multipart(sock_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        return std::optional<Message>();
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return std::optional<Message>();
      return Unavailable(std::string("telemetry receive failed: ") + e.what());
    }
    if (frames.size() != 2) {
      return Malformed(InvalidArgument("telemetry message has " + std::to_string(frames.size()) +
                                       " frames, expected 2 (topic, body)"));
    }
    Result<Message> m = Decode(frames[0].to_string_view(), frames[1].to_string_view());
    if (!m.ok()) return Malformed(m.status());
    ++counters_.received;
    Track(*m);
    return std::optional<Message>(std::move(m).value());
  }

  const SubscriberCounters& counters() const { return counters_; }

 private:
  struct Position {
    std::string run;
    uint64_t next_seq = 0;
  };

  Status Malformed(Status s) {
    ++counters_.malformed;
    counters_.last_error = s.message();
    return s;
  }

  // Gap rules (docs/PROTOCOL.md, "Gap accounting"): within one (run, topic)
  // each seq should be the previous one + 1; a larger seq counts the skipped
  // numbers as gaps. A new run id, or a seq going backwards (an engine
  // restarted under the same run id), restarts tracking without counting.
  void Track(const Message& m) {
    const Envelope& env = EnvelopeOf(m);
    std::string topic(TopicOf(m));
    auto it = positions_.find(topic);
    if (it != positions_.end() && it->second.run == env.run && env.seq >= it->second.next_seq) {
      const uint64_t missing = env.seq - it->second.next_seq;
      if (missing > 0) {
        counters_.gaps += static_cast<int64_t>(missing);
        counters_.gaps_by_topic[topic] += static_cast<int64_t>(missing);
      }
    }
    positions_[topic] = Position{env.run, env.seq + 1};
  }

  // Declared before sock_ so the socket closes before the context terminates.
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  SubscriberCounters counters_;
  std::map<std::string, Position> positions_;
};

Result<std::unique_ptr<Subscriber>> Subscriber::Connect(const SubscriberOptions& options) {
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>();
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot create telemetry SUB socket: ") + e.what());
  }
  RETURN_IF_ERROR(impl->Connect(options));
  return std::unique_ptr<Subscriber>(new Subscriber(std::move(impl)));
}

Subscriber::Subscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Subscriber::~Subscriber() = default;

Result<std::optional<Message>> Subscriber::Receive(std::chrono::milliseconds timeout) {
  return impl_->Receive(timeout);
}

const SubscriberCounters& Subscriber::counters() const { return impl_->counters(); }

}  // namespace sy::telemetry
