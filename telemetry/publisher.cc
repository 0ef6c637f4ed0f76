#include "telemetry/publisher.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <zmq.hpp>

#include "telemetry/zap_handler.h"

namespace sy::telemetry {

namespace {

using Clock = std::chrono::steady_clock;

// How long shutdown may spend sending what is still queued; the rest is
// counted as dropped so a destructor never stalls the engine's exit.
constexpr auto kFlushBudget = std::chrono::milliseconds(200);
// Pending messages a closing socket may keep trying to deliver.
constexpr int kLingerMs = 200;

}  // namespace

class Publisher::Impl {
 public:
  Impl(const PublisherOptions& options, std::string run_id, Clock::time_point epoch)
      : options_(options),
        run_id_(std::move(run_id)),
        epoch_(epoch),
        now_us_(options.now_us),
        ctx_(1),
        sock_(ctx_, zmq::socket_type::xpub) {}

  ~Impl() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  Status Bind() {
    if (options_.curve) {
      ASSIGN_OR_RETURN(zap_, ZapHandler::Start(ctx_, sock_, "telemetry", *options_.curve));
      RETURN_IF_ERROR(ApplyCurveServer(sock_, *options_.curve));
    }
    try {
      sock_.set(zmq::sockopt::linger, kLingerMs);
      sock_.set(zmq::sockopt::sndhwm, options_.sndhwm);
      // Refuse (EAGAIN) rather than silently discard at a subscriber's
      // high-water mark, so every loss is counted here (publisher.h).
      sock_.set(zmq::sockopt::xpub_nodrop, true);
      if (options_.zmtp_heartbeat_ivl_ms > 0) {
        sock_.set(zmq::sockopt::heartbeat_ivl, options_.zmtp_heartbeat_ivl_ms);
        sock_.set(zmq::sockopt::heartbeat_timeout, options_.zmtp_heartbeat_timeout_ms);
        // No heartbeat_ttl: it would arm a timer in each subscriber that
        // fires while a slow subscriber's receive queue is full, and libzmq
        // 4.3.x can abort on the reconnect that follows (zeromq/libzmq#3937).
      }
      sock_.bind(options_.endpoint);
      endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      return Unavailable("cannot bind telemetry XPUB socket to '" + options_.endpoint +
                         "': " + e.what());
    }
    return Status::Ok();
  }

  // The socket was created on the caller's thread; handing it to the sender
  // thread is safe because thread creation is a full memory barrier and the
  // caller never touches it again.
  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }

  void Publish(Message m) {
    bool was_empty = false;
    {
      std::lock_guard lk(mu_);
      Stamp(m);
      if (queue_.size() >= options_.queue_capacity) {
        CountDropLocked(std::string(TopicOf(m)));
        return;
      }
      was_empty = queue_.empty();
      if (std::holds_alternative<Meta>(m)) ++queued_metas_;
      queue_.push_back(std::move(m));
    }
    // The sender only sleeps on an empty queue, so only that transition needs a wake-up.
    if (was_empty) cv_.notify_one();
  }

  void SetMeta(const Meta& meta) {
    {
      std::lock_guard lk(mu_);
      meta_ = meta;
    }
    Publish(meta);
  }

  void SetState(std::string state, int64_t step) {
    std::lock_guard lk(mu_);
    state_ = std::move(state);
    step_ = step;
  }

  PublisherCounters counters() const {
    std::lock_guard lk(mu_);
    return counters_;
  }

  const std::string& run_id() const { return run_id_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  // REQUIRES: mu_ held. A dropped message still consumes its seq, which is
  // how consumers learn about the drop.
  void Stamp(Message& m) {
    Envelope& env = MutableEnvelopeOf(m);
    env.v = kSchemaVersion;
    env.run = run_id_;
    env.seq = next_seq_[std::string(TopicOf(m))]++;
    env.t_us =
        now_us_
            ? now_us_()
            : std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - epoch_).count();
  }

  // REQUIRES: mu_ held.
  void CountDropLocked(const std::string& topic) {
    ++counters_.dropped_total;
    ++counters_.dropped[topic];
  }

  // Sender thread only. False if ZeroMQ refused the message: with
  // ZMQ_XPUB_NODROP, when some subscriber's queue is at the high-water mark.
  bool Send(const Message& m) {
    WireMessage w = Encode(m);
    try {
      zmq::message_t topic(w.topic.data(), w.topic.size());
      zmq::message_t body(w.body.data(), w.body.size());
      // The high-water mark is checked on the first frame only (a queue
      // counts whole messages), so once the topic is accepted the body is
      // too and a refused message never leaves half a multipart behind.
      if (!sock_.send(topic, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
      return sock_.send(body, zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  // Sender thread only. An XPUB socket hands (un)subscriptions to its owner;
  // nobody here needs them (every subscriber takes all topics), but unread
  // they would pile up, one or two per subscriber (re)connect.
  void DrainSubscriptions() {
    try {
      zmq::message_t sub;
      while (sock_.recv(sub, zmq::recv_flags::dontwait)) {
      }
    } catch (const zmq::error_t&) {
      // Only ETERM/EFAULT are possible here; the socket outlives this thread.
    }
  }

  void SendCounted(const Message& m) {
    bool ok = Send(m);
    std::lock_guard lk(mu_);
    if (ok) {
      ++counters_.sent_total;
    } else {
      CountDropLocked(std::string(TopicOf(m)));
    }
  }

  void SendHeartbeat() {
    Message hb;
    {
      std::lock_guard lk(mu_);
      Heartbeat h;
      h.interval_ms = options_.heartbeat_ms;
      h.state = state_;
      h.step = step_;
      h.sent_total = counters_.sent_total;
      h.dropped_total = counters_.dropped_total;
      h.dropped = counters_.dropped;
      hb = std::move(h);
      Stamp(hb);
    }
    SendCounted(hb);
  }

  void ResendMeta() {
    std::optional<Message> meta;
    {
      std::lock_guard lk(mu_);
      // A Meta still queued carries a lower seq than a re-send stamped now
      // and would reach subscribers after it: a false gap. It is the latest
      // Meta anyway and goes out with the next batch.
      if (!meta_ || queued_metas_ > 0) return;
      meta = Message(*meta_);
      Stamp(*meta);
    }
    SendCounted(*meta);
  }

  void Run() {
    const auto hb_every = std::chrono::milliseconds(options_.heartbeat_ms);
    const auto meta_every = std::chrono::milliseconds(options_.meta_ms);
    auto next_hb = Clock::now() + hb_every;
    auto next_meta = Clock::now() + meta_every;
    for (;;) {
      if (options_.before_batch) options_.before_batch();
      std::deque<Message> batch;
      bool stop = false;
      {
        std::unique_lock lk(mu_);
        cv_.wait_until(lk, std::min(next_hb, next_meta),
                       [&] { return !queue_.empty() || stopping_; });
        batch.swap(queue_);
        queued_metas_ = 0;
        stop = stopping_;
      }
      DrainSubscriptions();
      const auto flush_deadline = Clock::now() + kFlushBudget;
      int64_t sent = 0;
      std::map<std::string, int64_t> dropped;
      for (const Message& m : batch) {
        if ((stop && Clock::now() > flush_deadline) || !Send(m)) {
          ++dropped[std::string(TopicOf(m))];
        } else {
          ++sent;
        }
        // A big batch (full traces of a fast sim) can take seconds to
        // serialise; liveness must not wait for it, or observers call a
        // busy engine lost.
        if (!stop && Clock::now() >= next_hb) {
          SendHeartbeat();
          next_hb = Clock::now() + hb_every;
        }
      }
      {
        std::lock_guard lk(mu_);
        counters_.sent_total += sent;
        for (const auto& [topic, n] : dropped) {
          counters_.dropped_total += n;
          counters_.dropped[topic] += n;
        }
      }
      const auto now = Clock::now();
      if (stop) {
        // Final totals, so an observer of a clean shutdown sees the whole count.
        SendHeartbeat();
        return;
      }
      if (now >= next_hb) {
        SendHeartbeat();
        next_hb = now + hb_every;
      }
      if (now >= next_meta) {
        ResendMeta();
        next_meta = now + meta_every;
      }
    }
  }

  const PublisherOptions options_;
  const std::string run_id_;
  const Clock::time_point epoch_;
  const std::function<int64_t()> now_us_;
  std::string endpoint_;
  // Declared before sock_ so the socket closes before the context terminates,
  // and the ZAP handler (when CURVE is on) outlives the socket it guards.
  zmq::context_t ctx_;
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t sock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  int64_t queued_metas_ = 0;  // Meta messages in queue_
  std::map<std::string, uint64_t> next_seq_;
  PublisherCounters counters_;
  std::string state_ = "running";
  int64_t step_ = 0;
  std::optional<Meta> meta_;
  bool stopping_ = false;

  std::thread thread_;
};

Result<std::unique_ptr<Publisher>> Publisher::Start(const PublisherOptions& options,
                                                    std::string run_id,
                                                    std::chrono::steady_clock::time_point epoch) {
  if (options.queue_capacity == 0) return InvalidArgument("publisher queue_capacity must be > 0");
  if (options.heartbeat_ms <= 0 || options.meta_ms <= 0) {
    return InvalidArgument("publisher heartbeat_ms and meta_ms must be > 0");
  }
  if (options.sndhwm < 0 || options.zmtp_heartbeat_ivl_ms < 0 ||
      (options.zmtp_heartbeat_ivl_ms > 0 && options.zmtp_heartbeat_timeout_ms <= 0)) {
    return InvalidArgument(
        "publisher sndhwm and zmtp_heartbeat_ivl_ms must be >= 0, and zmtp_heartbeat_timeout_ms "
        "> 0 when heartbeats are on");
  }
  RETURN_IF_ERROR(
      CheckBindSecurity("telemetry XPUB socket", options.endpoint, options.curve.has_value()));
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(options, std::move(run_id), epoch);
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot create telemetry XPUB socket: ") + e.what());
  }
  RETURN_IF_ERROR(impl->Bind());
  impl->StartThread();
  return std::unique_ptr<Publisher>(new Publisher(std::move(impl)));
}

Publisher::Publisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Publisher::~Publisher() = default;

void Publisher::Publish(Message m) { impl_->Publish(std::move(m)); }
void Publisher::SetMeta(const Meta& meta) { impl_->SetMeta(meta); }
void Publisher::SetState(std::string state, int64_t step) {
  impl_->SetState(std::move(state), step);
}
PublisherCounters Publisher::counters() const { return impl_->counters(); }
const std::string& Publisher::run_id() const { return impl_->run_id(); }
const std::string& Publisher::endpoint() const { return impl_->endpoint(); }

}  // namespace sy::telemetry
