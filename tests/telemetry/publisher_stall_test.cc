// Publisher with a subscriber that stops reading (a wedged or SIGSTOPped
// observer) beside one that keeps reading, over real ZeroMQ sockets on
// loopback: drops are refused and counted per topic on the publisher's side,
// Publish() never waits, the healthy subscriber sees exactly those drops as
// gaps, and once the ZMTP heartbeat cuts the stalled peer off the healthy one
// gets every message again.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <zmq.hpp>

#include "base/status_matchers.h"
#include "telemetry/publisher.h"
#include "telemetry/subscriber.h"

namespace sy::telemetry {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Generous bound for "eventually" on a loaded 2-core machine.
constexpr auto kPatience = 15s;

// A few hundred bytes per span, so the kernel's socket buffers fill in a
// fraction of a second.
Spans BigSpans(int64_t step) {
  Spans s;
  s.step = step;
  for (int i = 0; i < 16; ++i) {
    s.spans.push_back(Span{.device = i % 4,
                           .layer = i,
                           .name = "moe_expert_gemm_with_a_long_kernel_name_" + std::to_string(i),
                           .kind = "compute",
                           .start_us = step * 100 + i,
                           .dur_us = 7,
                           .tokens = 64,
                           .flops = 123456789,
                           .bytes = 987654});
  }
  return s;
}

// Publishes BigSpans on its own thread, as the engine's step loop would,
// until destroyed; remembers the slowest Publish() call.
class Producer {
 public:
  explicit Producer(Publisher& pub)
      : thread_([this, &pub] {
          for (int64_t step = 0; !stop_; ++step) {
            Spans s = BigSpans(step);
            const auto t0 = Clock::now();
            pub.Publish(std::move(s));
            const auto us =
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
            if (us > slowest_us_) slowest_us_ = us;
            ++published_;
            std::this_thread::sleep_for(200us);
          }
        }) {}
  ~Producer() {
    stop_ = true;
    thread_.join();
  }
  int64_t slowest_us() const { return slowest_us_; }
  int64_t published() const { return published_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> slowest_us_{0};
  std::atomic<int64_t> published_{0};
  std::thread thread_;
};

TEST(PublisherStallTest, StalledSubscriberCostsCountedDropsUntilHeartbeatCutsItOff) {
  PublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.heartbeat_ms = 50;
  o.meta_ms = 200;
  o.sndhwm = 50;
  o.zmtp_heartbeat_ivl_ms = 100;
  o.zmtp_heartbeat_timeout_ms = 1000;
  auto started = Publisher::Start(o, "run-stall", Clock::now());
  ASSERT_THAT(started, IsOk());
  std::unique_ptr<Publisher> pub = std::move(started).value();

  auto connected = Subscriber::Connect({.endpoint = pub->endpoint()});
  ASSERT_THAT(connected, IsOk());
  std::unique_ptr<Subscriber> healthy = std::move(connected).value();

  // The stalled subscriber: a plain SUB with a tiny receive queue and
  // kernel buffer that reads one message (proof that it is subscribed) and
  // then nothing. Once its queue is full its I/O thread stops reading the
  // socket, so, like a stopped process, it no longer answers PINGs.
  zmq::context_t ctx(1);
  zmq::socket_t stalled(ctx, zmq::socket_type::sub);
  stalled.set(zmq::sockopt::linger, 0);
  stalled.set(zmq::sockopt::rcvhwm, 10);
  stalled.set(zmq::sockopt::rcvbuf, 16384);
  stalled.set(zmq::sockopt::subscribe, "");
  stalled.connect(pub->endpoint());
  zmq::message_t first;
  stalled.set(zmq::sockopt::rcvtimeo, static_cast<int>(kPatience / 1ms));
  ASSERT_TRUE(stalled.recv(first)) << "stalled subscriber never got a message";

  std::map<std::string, int64_t> received;  // healthy subscriber, per topic
  auto receive_some = [&](std::chrono::milliseconds for_how_long) {
    const auto until = Clock::now() + for_how_long;
    while (Clock::now() < until) {
      auto r = healthy->Receive(20ms);
      if (r.ok() && r->has_value()) ++received[std::string(TopicOf(**r))];
    }
  };
  receive_some(100ms);

  {
    Producer producer(*pub);
    // 1. The stalled queue fills: messages are refused and counted by topic.
    const auto deadline = Clock::now() + kPatience;
    while (Clock::now() < deadline && pub->counters().dropped["spans"] == 0) receive_some(50ms);
    ASSERT_GT(pub->counters().dropped["spans"], 0) << "no drop counted while a subscriber stalls";

    // 2. Within about ivl + timeout the heartbeat cuts the stalled peer off:
    //    drops stop while the producer goes on, and the healthy subscriber
    //    receives spans again. Without the cut every later message would be
    //    refused for as long as the stall lasts.
    bool cut = false;
    while (!cut && Clock::now() < deadline) {
      const int64_t dropped_before = pub->counters().dropped_total;
      const int64_t spans_before = received["spans"];
      receive_some(500ms);
      cut =
          pub->counters().dropped_total == dropped_before && received["spans"] > spans_before + 50;
    }
    EXPECT_TRUE(cut) << "drops went on: the stalled subscriber was never cut off";
    // The engine's side never waited on the stalled subscriber.
    EXPECT_LT(producer.slowest_us(), 500'000);
    EXPECT_GT(producer.published(), 1000);
  }

  // A last message after the producer stopped carries the final seq, so the
  // healthy subscriber has seen every drop as a gap: exactly the refused
  // messages, since what the socket accepts reaches every connected peer.
  pub->Publish(BigSpans(-1));
  const auto deadline = Clock::now() + kPatience;
  bool got_last = false;
  while (!got_last && Clock::now() < deadline) {
    auto r = healthy->Receive(50ms);
    if (r.ok() && r->has_value()) {
      const auto* s = std::get_if<Spans>(&**r);
      got_last = s != nullptr && s->step == -1;
    }
  }
  ASSERT_TRUE(got_last);
  const PublisherCounters c = pub->counters();
  EXPECT_EQ(healthy->counters().gaps_by_topic.count("spans")
                ? healthy->counters().gaps_by_topic.at("spans")
                : 0,
            c.dropped.at("spans"));
  EXPECT_EQ(healthy->counters().malformed, 0);
}

TEST(PublisherStallTest, RejectsBadSocketOptions) {
  PublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.sndhwm = -1;
  EXPECT_THAT(Publisher::Start(o, "r", Clock::now()), StatusIs(StatusCode::kInvalidArgument));
  o.sndhwm = 10;
  o.zmtp_heartbeat_ivl_ms = 100;
  o.zmtp_heartbeat_timeout_ms = 0;
  EXPECT_THAT(Publisher::Start(o, "r", Clock::now()), StatusIs(StatusCode::kInvalidArgument));
  o.zmtp_heartbeat_ivl_ms = 0;  // heartbeats off: the timeout is not used
  EXPECT_THAT(Publisher::Start(o, "r", Clock::now()), IsOk());
}

}  // namespace
}  // namespace sy::telemetry
