// Publisher, observed through a Subscriber, over real ZeroMQ sockets on
// loopback. Every publisher binds tcp://127.0.0.1:* so parallel test processes
// never collide.
#include "telemetry/publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "base/status_matchers.h"
#include "telemetry/subscriber.h"
#include "tests/telemetry/samples.h"

namespace sy::telemetry {
namespace {

using namespace std::chrono_literals;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Generous bound for "eventually" on a loaded 2-core machine; tests wait for
// a condition, never assert how fast it happened.
constexpr auto kPatience = 10s;

PublisherOptions FastOptions() {
  PublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.heartbeat_ms = 20;
  o.meta_ms = 50;
  return o;
}

std::unique_ptr<Publisher> StartPublisher(const PublisherOptions& o, std::string run = "run-1") {
  auto p = Publisher::Start(o, std::move(run), Clock::now());
  EXPECT_THAT(p, IsOk());
  return p.ok() ? std::move(p).value() : nullptr;
}

std::unique_ptr<Subscriber> Connect(const std::string& endpoint) {
  auto s = Subscriber::Connect({.endpoint = endpoint});
  EXPECT_THAT(s, IsOk());
  return s.ok() ? std::move(s).value() : nullptr;
}

// Receives until `pred` accepts a message or patience runs out.
template <typename Pred>
std::optional<Message> ReceiveUntil(Subscriber& sub, Pred pred) {
  const auto deadline = Clock::now() + kPatience;
  while (Clock::now() < deadline) {
    auto r = sub.Receive(100ms);
    if (r.ok() && r->has_value() && pred(**r)) return **r;
  }
  return std::nullopt;
}

template <typename T>
std::optional<T> ReceiveA(Subscriber& sub) {
  auto m = ReceiveUntil(sub, [](const Message& m) { return std::holds_alternative<T>(m); });
  if (!m) return std::nullopt;
  return std::get<T>(*m);
}

TEST(PublisherTest, EveryTopicArrivesStampedInOrder) {
  auto pub = StartPublisher(FastOptions());
  ASSERT_NE(pub, nullptr);
  EXPECT_THAT(pub->endpoint(), ::testing::StartsWith("tcp://127.0.0.1:"));
  auto sub = Connect(pub->endpoint());
  ASSERT_NE(sub, nullptr);
  // A SUB only gets what is sent after its subscription reaches the PUB: a
  // heartbeat proves it has.
  ASSERT_TRUE(ReceiveA<Heartbeat>(*sub).has_value());

  for (int round = 0; round < 3; ++round) {
    for (const Message& m : testing::SampleMessages()) {
      if (!std::holds_alternative<Heartbeat>(m)) pub->Publish(m);
    }
  }
  std::map<std::string, std::vector<uint64_t>> seqs;
  auto done = [&] {
    for (const auto& m : testing::SampleMessages()) {
      std::string t(TopicOf(m));
      if (t != "heartbeat" && t != "meta" && seqs[t].size() < 3) return false;
    }
    return true;
  };
  ReceiveUntil(*sub, [&](const Message& m) {
    const Envelope& env = EnvelopeOf(m);
    EXPECT_EQ(env.v, kSchemaVersion);
    EXPECT_EQ(env.run, "run-1");
    EXPECT_GE(env.t_us, 0);
    seqs[std::string(TopicOf(m))].push_back(env.seq);
    return done();
  });
  ASSERT_TRUE(done());
  EXPECT_EQ(seqs["step"], (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(seqs["spans"], (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(sub->counters().gaps, 0);
  EXPECT_EQ(sub->counters().malformed, 0);
  EXPECT_EQ(pub->counters().dropped_total, 0);
  EXPECT_GT(pub->counters().sent_total, 0);
}

TEST(PublisherTest, LateJoinerLearnsMetaAndHeartbeats) {
  auto pub = StartPublisher(FastOptions(), "run-late");
  ASSERT_NE(pub, nullptr);
  pub->SetMeta(testing::SampleMeta());
  pub->SetState("paused", 12);
  std::this_thread::sleep_for(100ms);  // the first Meta is long gone

  auto sub = Connect(pub->endpoint());
  ASSERT_NE(sub, nullptr);
  std::optional<Meta> meta = ReceiveA<Meta>(*sub);
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(meta->env.run, "run-late");
  EXPECT_GT(meta->env.seq, 0u);  // re-sends take fresh sequence numbers
  EXPECT_EQ(meta->model.preset, "tiny-hybrid");
  EXPECT_EQ(meta->expert_device, (std::vector<int>{0, 0, 1, 1}));

  std::optional<Heartbeat> hb = ReceiveA<Heartbeat>(*sub);
  ASSERT_TRUE(hb.has_value());
  EXPECT_EQ(hb->state, "paused");
  EXPECT_EQ(hb->step, 12);
  EXPECT_EQ(hb->interval_ms, 20);
  EXPECT_GT(hb->sent_total, 0);

  // Several Meta re-sends, each with the next seq.
  std::optional<Meta> again = ReceiveA<Meta>(*sub);
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(again->env.seq, meta->env.seq);
  EXPECT_EQ(sub->counters().gaps, 0);
}

// Blocks the sender thread on request, through PublisherOptions::before_batch.
class SenderGate {
 public:
  void Hook() {
    std::unique_lock lk(mu_);
    if (!armed_) return;
    blocked_ = true;
    cv_.notify_all();
    cv_.wait(lk, [&] { return released_; });
    armed_ = false;
  }
  void CloseAndWaitBlocked() {
    std::unique_lock lk(mu_);
    armed_ = true;
    ASSERT_TRUE(cv_.wait_for(lk, kPatience, [&] { return blocked_; }));
  }
  void Open() {
    std::lock_guard lk(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, blocked_ = false, released_ = false;
};

TEST(PublisherTest, QueueOverflowIsCountedAndSeenAsGaps) {
  constexpr int kCapacity = 4;
  constexpr int kExtra = 6;
  SenderGate gate;  // outlives the publisher, whose thread calls it
  PublisherOptions o = FastOptions();
  o.queue_capacity = kCapacity;
  o.before_batch = [&gate] { gate.Hook(); };
  auto pub = StartPublisher(o);
  ASSERT_NE(pub, nullptr);
  // Runs before pub's destructor, which joins the sender: never leave it parked.
  struct OpenOnExit {
    SenderGate& gate;
    ~OpenOnExit() { gate.Open(); }
  } open_on_exit{gate};
  auto sub = Connect(pub->endpoint());
  ASSERT_NE(sub, nullptr);
  ASSERT_TRUE(ReceiveA<Heartbeat>(*sub).has_value());

  // With the sender parked the queue holds exactly kCapacity; the rest drop.
  gate.CloseAndWaitBlocked();
  Step step;
  for (int i = 0; i < kCapacity + kExtra; ++i) {
    step.step = i;
    pub->Publish(step);
  }
  PublisherCounters c = pub->counters();
  EXPECT_EQ(c.dropped_total, kExtra);
  EXPECT_EQ(c.dropped["step"], kExtra);
  gate.Open();

  std::vector<int64_t> steps;
  auto collect_until = [&](int64_t last) {
    ReceiveUntil(*sub, [&](const Message& m) {
      if (auto* s = std::get_if<Step>(&m)) steps.push_back(s->step);
      return !steps.empty() && steps.back() == last;
    });
  };
  // Once step 3 arrives the sender has taken the queue, so the next Publish
  // is not dropped; the gap shows when that later message arrives.
  collect_until(kCapacity - 1);
  step.step = 100;
  pub->Publish(step);
  collect_until(100);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 100}));
  EXPECT_EQ(sub->counters().gaps, kExtra);
  EXPECT_EQ(sub->counters().gaps_by_topic, (std::map<std::string, int64_t>{{"step", kExtra}}));
  EXPECT_EQ(pub->counters().dropped_total, kExtra);

  std::optional<Heartbeat> hb = ReceiveA<Heartbeat>(*sub);
  ASSERT_TRUE(hb.has_value());
  EXPECT_EQ(hb->dropped_total, kExtra);
  EXPECT_EQ(hb->dropped, (std::map<std::string, int64_t>{{"step", kExtra}}));
}

TEST(PublisherTest, DestructorFlushesTheQueue) {
  auto pub = StartPublisher(FastOptions());
  ASSERT_NE(pub, nullptr);
  auto sub = Connect(pub->endpoint());
  ASSERT_NE(sub, nullptr);
  ASSERT_TRUE(ReceiveA<Heartbeat>(*sub).has_value());
  pub->SetState("stopping", 5);
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i) {
    RequestDone r;
    r.id = i;
    pub->Publish(r);
  }
  pub.reset();

  std::set<int64_t> ids;
  std::optional<Message> last_hb = ReceiveUntil(*sub, [&](const Message& m) {
    if (auto* r = std::get_if<RequestDone>(&m)) ids.insert(r->id);
    auto* hb = std::get_if<Heartbeat>(&m);
    return hb != nullptr && hb->state == "stopping" && ids.size() == kN;
  });
  EXPECT_EQ(ids.size(), size_t{kN});
  ASSERT_TRUE(last_hb.has_value());
  EXPECT_EQ(std::get<Heartbeat>(*last_hb).dropped_total, 0);
  EXPECT_EQ(sub->counters().gaps_by_topic.count("request"), 0u);
}

// The sender re-sends the latest Meta on its own clock, stamping it then; a
// Meta that SetMeta queued earlier (a lower seq) must not go out after it,
// or every subscriber counts a gap that no drop caused.
TEST(PublisherTest, MetaResendsNeverOvertakeAQueuedMeta) {
  PublisherOptions o = FastOptions();
  o.meta_ms = 1;  // a re-send after almost every batch
  o.sndhwm = 0;   // nothing refused: any gap would be an ordering fault
  auto pub = StartPublisher(o);
  ASSERT_NE(pub, nullptr);
  auto sub = Connect(pub->endpoint());
  ASSERT_NE(sub, nullptr);
  ASSERT_TRUE(ReceiveA<Heartbeat>(*sub).has_value());

  constexpr int kMetas = 3000;
  Meta meta = testing::SampleMeta();
  Step step;
  for (int i = 0; i < kMetas; ++i) {
    pub->SetMeta(meta);
    step.step = i;
    pub->Publish(step);  // batches the sender must work through
  }
  step.step = -1;
  pub->Publish(step);
  bool saw_last = false;
  int metas_after = 0;
  ReceiveUntil(*sub, [&](const Message& m) {
    if (auto* s = std::get_if<Step>(&m); s != nullptr && s->step == -1) saw_last = true;
    if (saw_last && std::holds_alternative<Meta>(m)) ++metas_after;
    return metas_after >= 2;  // a re-send after everything queued
  });
  ASSERT_TRUE(saw_last);
  EXPECT_EQ(pub->counters().dropped_total, 0);
  SubscriberCounters c = sub->counters();
  EXPECT_EQ(c.gaps, 0) << "of which meta: " << c.gaps_by_topic["meta"];
}

TEST(PublisherTest, BindFailureIsUnavailable) {
  auto first = StartPublisher(FastOptions());
  ASSERT_NE(first, nullptr);
  PublisherOptions o = FastOptions();
  o.endpoint = first->endpoint();
  EXPECT_THAT(
      Publisher::Start(o, "run-2", Clock::now()),
      StatusIs(StatusCode::kUnavailable, AllOf(HasSubstr(first->endpoint()), HasSubstr("in use"))));
  o.endpoint = "bogus://nowhere";
  EXPECT_THAT(Publisher::Start(o, "run-2", Clock::now()), StatusIs(StatusCode::kUnavailable));
  o.endpoint = "tcp://127.0.0.1:*";
  o.queue_capacity = 0;
  EXPECT_THAT(Publisher::Start(o, "run-2", Clock::now()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("queue_capacity")));
}

}  // namespace
}  // namespace sy::telemetry
