// Subscriber against a raw ZeroMQ PUB socket on loopback, to send what a
// Publisher never would (wrong frame counts, garbage, arbitrary seq numbers).
#include "telemetry/subscriber.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <zmq.hpp>

#include "base/status_matchers.h"

namespace sy::telemetry {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr auto kPatience = 10s;

std::unique_ptr<Subscriber> Connect(const std::string& endpoint) {
  auto s = Subscriber::Connect({.endpoint = endpoint});
  EXPECT_THAT(s, IsOk());
  return s.ok() ? std::move(s).value() : nullptr;
}

class RawPub {
 public:
  RawPub() : sock_(ctx_, zmq::socket_type::pub) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.bind("tcp://127.0.0.1:*");
  }
  std::string endpoint() { return sock_.get(zmq::sockopt::last_endpoint); }
  void Send(std::vector<std::string> frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      sock_.send(zmq::buffer(frames[i]),
                 i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  void SendStep(const std::string& run, uint64_t seq) {
    Step s;
    s.env.run = run;
    s.env.seq = seq;
    WireMessage w = Encode(s);
    Send({w.topic, w.body});
  }
  // Sends heartbeats until the subscriber sees one (slow-joiner handshake).
  void Handshake(Subscriber& sub) {
    Heartbeat hb;
    hb.env.run = "handshake";
    const auto deadline = Clock::now() + kPatience;
    while (Clock::now() < deadline) {
      WireMessage w = Encode(hb);
      Send({w.topic, w.body});
      auto r = sub.Receive(20ms);
      if (r.ok() && r->has_value()) break;
    }
    while (true) {  // drain the rest of the handshake
      auto r = sub.Receive(50ms);
      if (!r.ok() || !r->has_value()) break;
    }
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
};

Status NextStatus(Subscriber& sub) {
  const auto deadline = Clock::now() + kPatience;
  while (Clock::now() < deadline) {
    auto r = sub.Receive(100ms);
    if (!r.ok()) return r.status();
    if (r->has_value()) return Status::Ok();
  }
  return Unavailable("nothing received");
}

TEST(SubscriberTest, MalformedMessagesAreCountedAndSkipped) {
  RawPub raw;
  auto sub = Connect(raw.endpoint());
  ASSERT_NE(sub, nullptr);
  raw.Handshake(*sub);
  const int64_t received_before = sub->counters().received;

  raw.Send({"step"});
  EXPECT_THAT(NextStatus(*sub),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1 frames, expected 2")));
  raw.Send({"step", "{}", "extra"});
  EXPECT_THAT(NextStatus(*sub), StatusIs(StatusCode::kInvalidArgument, HasSubstr("3 frames")));
  raw.Send({"step", "{not json"});
  EXPECT_THAT(NextStatus(*sub), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'step'")));
  raw.Send({"weather", "{}"});
  EXPECT_THAT(NextStatus(*sub),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown topic 'weather'")));
  raw.SendStep("run-a", 0);
  EXPECT_THAT(NextStatus(*sub), IsOk());

  EXPECT_EQ(sub->counters().malformed, 4);
  EXPECT_EQ(sub->counters().received, received_before + 1);
  EXPECT_THAT(sub->counters().last_error, HasSubstr("weather"));
}

TEST(SubscriberTest, GapAccountingPerRunAndTopic) {
  RawPub raw;
  auto sub = Connect(raw.endpoint());
  ASSERT_NE(sub, nullptr);
  raw.Handshake(*sub);

  // seq: 0 1 5 (3 missing) | 2 (backwards: restart, not counted) 3 |
  // new run at 10 (reset) 11 13 (1 missing)
  const std::vector<std::pair<std::string, uint64_t>> sent = {
      {"run-a", 0}, {"run-a", 1},  {"run-a", 5},  {"run-a", 2},
      {"run-a", 3}, {"run-b", 10}, {"run-b", 11}, {"run-b", 13}};
  for (const auto& [run, seq] : sent) raw.SendStep(run, seq);
  for (size_t i = 0; i < sent.size(); ++i) ASSERT_THAT(NextStatus(*sub), IsOk());

  EXPECT_EQ(sub->counters().gaps, 4);
  EXPECT_EQ(sub->counters().gaps_by_topic.at("step"), 4);
  EXPECT_EQ(sub->counters().gaps_by_topic.count("heartbeat"), 0u);
}

TEST(SubscriberTest, BadEndpointIsInvalidArgument) {
  EXPECT_THAT(Subscriber::Connect({.endpoint = "not an endpoint"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an endpoint")));
}

TEST(SubscriberTest, TimeoutWithoutPublisherIsEmpty) {
  auto sub = Connect("tcp://127.0.0.1:1");  // nothing listens there
  ASSERT_NE(sub, nullptr);
  auto r = sub->Receive(10ms);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(r->has_value());
}

}  // namespace
}  // namespace sy::telemetry
