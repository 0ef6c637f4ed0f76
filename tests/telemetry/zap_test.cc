// CURVE on real sockets (loopback, so no namespace is needed): the ZAP
// handler admits allow-listed keys with their User-Id, refuses the rest and
// reports them; Publisher and ControlServer refuse to bind beyond loopback
// without CURVE. The namespace test (tests/engine/server/auth_netns_test.cc)
// covers the engine on a non-loopback address.
#include "telemetry/zap_handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "telemetry/control.h"
#include "telemetry/publisher.h"
#include "telemetry/subscriber.h"
#include "tests/telemetry/curve_fixture.h"

namespace sy::telemetry {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr auto kPatience = 10s;

// Receives until a message arrives or `wait` passes.
bool GetsAnything(Subscriber& sub, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    Result<std::optional<Message>> m = sub.Receive(50ms);
    if (m.ok() && m->has_value()) return true;
  }
  return false;
}

// Waits until a refusal `pred` accepts has been pushed to `log`; `seen`
// keeps every refusal drained so far, so checks may come in any order.
// `knock`, if given, runs once a second while waiting (a new attempt).
template <typename Pred>
bool WaitForRefusal(RefusalLog& log, std::vector<AuthRefusal>& seen, Pred pred,
                    const std::function<void()>& knock = {}) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (int round = 1;; ++round) {
    if (knock && round % 50 == 0) knock();
    for (AuthRefusal& r : log.Drain()) seen.push_back(std::move(r));
    for (const AuthRefusal& r : seen) {
      if (pred(r)) return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

class ZapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CurveAvailable());
    keys_ = TestKeys::Make();
  }
  TestKeys keys_;
  std::shared_ptr<RefusalLog> refusals_ = std::make_shared<RefusalLog>(256, /*fold_ms=*/0);
  std::vector<AuthRefusal> seen_;
};

TEST_F(ZapTest, PublisherServesAllowListedSubscribersOnly) {
  PublisherOptions po;
  po.endpoint = "tcp://127.0.0.1:*";
  po.heartbeat_ms = 20;
  po.curve = keys_.Server(refusals_);
  ASSERT_OK_AND_ASSIGN(auto pub, Publisher::Start(po, "run-zap", std::chrono::steady_clock::now()));

  auto subscribe = [&](std::optional<CurveClient> curve) {
    SubscriberOptions so;
    so.endpoint = pub->endpoint();
    so.curve = std::move(curve);
    return Subscriber::Connect(so);
  };
  ASSERT_OK_AND_ASSIGN(auto observer, subscribe(keys_.Client(keys_.observer)));
  ASSERT_OK_AND_ASSIGN(auto op, subscribe(keys_.Client(keys_.op)));
  ASSERT_OK_AND_ASSIGN(auto stranger, subscribe(keys_.Client(keys_.stranger)));
  ASSERT_OK_AND_ASSIGN(auto plain, subscribe(std::nullopt));
  EXPECT_TRUE(GetsAnything(*observer, kPatience));
  EXPECT_TRUE(GetsAnything(*op, kPatience));
  // Heartbeats flow every 20 ms: a second of silence is a refusal.
  EXPECT_FALSE(GetsAnything(*stranger, 1s));
  EXPECT_FALSE(GetsAnything(*plain, 1s));
  EXPECT_TRUE(WaitForRefusal(*refusals_, seen_, [&](const AuthRefusal& r) {
    return r.socket == "telemetry" && r.public_key == keys_.stranger.public_key &&
           r.peer_address == "127.0.0.1" && r.mechanism == "CURVE" &&
           r.reason == "public key is not in the allow-list";
  }));
  // The keyless subscriber never reaches ZAP; the socket monitor reports it.
  // It gives up after its one failed handshake, and when it resets before
  // libzmq has read its greeting the failure comes without detail (not
  // reported), which happens under load: so another keyless one knocks.
  std::vector<std::unique_ptr<Subscriber>> knocking;
  EXPECT_TRUE(WaitForRefusal(
      *refusals_, seen_,
      [&](const AuthRefusal& r) {
        return r.socket == "telemetry" && r.public_key.empty() &&
               r.reason.find("mechanism mismatch") != std::string::npos;
      },
      [&] {
        auto again = subscribe(std::nullopt);
        if (again.ok()) knocking.push_back(std::move(again).value());
      }));
}

TEST_F(ZapTest, ControlServerPassesTheRoleAsUserId) {
  ASSERT_OK_AND_ASSIGN(auto server, ControlServer::Bind({.endpoint = "tcp://127.0.0.1:*",
                                                         .curve = keys_.Server(refusals_)}));
  std::atomic<bool> done{false};
  std::thread serve([&] {
    while (!done.load()) {
      server->ServeFor(
          [](const CommandRequest& r) {
            return OkReply(r.id, {{"user", r.user_id}});
          },
          20ms);
    }
  });
  auto call = [&](std::optional<CurveClient> curve, std::chrono::milliseconds timeout) {
    Result<std::unique_ptr<ControlClient>> c = ControlClient::Connect(server->endpoint(), curve);
    EXPECT_THAT(c.status(), IsOk());
    CommandRequest req;
    req.cmd = "whoami";
    return (*c)->Call(req, timeout);
  };
  Result<CommandReply> op = call(keys_.Client(keys_.op), kPatience);
  ASSERT_THAT(op.status(), IsOk());
  EXPECT_EQ(op->result["user"], "operator:alice");
  Result<CommandReply> obs = call(keys_.Client(keys_.observer), kPatience);
  ASSERT_THAT(obs.status(), IsOk());
  EXPECT_EQ(obs->result["user"], "observer:dashboard");
  EXPECT_THAT(call(keys_.Client(keys_.stranger), 500ms).status(),
              StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(call(std::nullopt, 500ms).status(), StatusIs(StatusCode::kUnavailable));
  // A client that has the wrong server key fails the CURVE handshake itself.
  CurveClient wrong = keys_.Client(keys_.op);
  wrong.server_public_key = keys_.stranger.public_key;
  EXPECT_THAT(call(wrong, 500ms).status(), StatusIs(StatusCode::kUnavailable));
  EXPECT_TRUE(WaitForRefusal(*refusals_, seen_, [&](const AuthRefusal& r) {
    return r.socket == "control" && r.public_key == keys_.stranger.public_key;
  }));
  done = true;
  serve.join();
}

TEST_F(ZapTest, RefusesToBindBeyondLoopbackWithoutCurve) {
  PublisherOptions po;
  po.endpoint = "tcp://0.0.0.0:0";
  EXPECT_THAT(Publisher::Start(po, "r", std::chrono::steady_clock::now()).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       testing::AllOf(HasSubstr("tcp://0.0.0.0:0"), HasSubstr("CURVE"))));
  EXPECT_THAT(ControlServer::Bind("tcp://*:0").status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("tcp://*:0")));
  // With CURVE the same bind is allowed (port 0: any free one).
  EXPECT_THAT(
      ControlServer::Bind({.endpoint = "tcp://0.0.0.0:*", .curve = keys_.Server(nullptr)}).status(),
      IsOk());
}

TEST_F(ZapTest, RejectsBadServerKeysAndAMissingAllowList) {
  CurveServer bad = keys_.Server(nullptr);
  bad.secret_key = "too short";
  EXPECT_THAT(ControlServer::Bind({.endpoint = "tcp://127.0.0.1:*", .curve = bad}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("server secret key")));
  CurveServer no_list = keys_.Server(nullptr);
  no_list.allow = nullptr;
  EXPECT_THAT(ControlServer::Bind({.endpoint = "tcp://127.0.0.1:*", .curve = no_list}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("allow-list")));
  SubscriberOptions so;
  so.endpoint = "tcp://127.0.0.1:1";
  so.curve = keys_.Client(keys_.op);
  so.curve->server_public_key = "nope";
  EXPECT_THAT(Subscriber::Connect(so).status(), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace sy::telemetry
