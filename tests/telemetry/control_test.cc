// ControlServer and ControlClient over real ZeroMQ sockets on loopback, with
// REQ, raw DEALER and ControlClient peers.
#include "telemetry/control.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/status_matchers.h"

namespace sy::telemetry {
namespace {

using namespace std::chrono_literals;
using ::nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr auto kPatience = 10s;

CommandRequest Req(std::string cmd, json args = json::object(), json id = nullptr) {
  CommandRequest r;
  r.id = std::move(id);
  r.cmd = std::move(cmd);
  r.args = std::move(args);
  return r;
}

// Echoes the command; "boom" throws, "status" answers like an engine would.
struct Handler {
  std::atomic<int> calls{0};
  CommandReply operator()(const CommandRequest& r) {
    ++calls;
    if (r.cmd == "boom") throw std::runtime_error("kaboom");
    if (r.cmd == "status") return OkReply(r.id, {{"state", "running"}, {"step", 3}});
    if (r.cmd == "echo") return OkReply(r.id, {{"cmd", r.cmd}, {"args", r.args}});
    return ErrorReply(r.id, NotFound("unknown command '" + r.cmd + "'"));
  }
  CommandHandler fn() {
    return [this](const CommandRequest& r) { return (*this)(r); };
  }
};

class ControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ControlServer::Bind("tcp://127.0.0.1:*");
    ASSERT_THAT(s, IsOk());
    server_ = std::move(s).value();
  }

  // Serves until one request has been answered.
  void ServeOne() { ASSERT_EQ(server_->ServeFor(handler_.fn(), kPatience, 1), 1); }

  // A raw socket connected to the server.
  zmq::socket_t Raw(zmq::socket_type type) {
    zmq::socket_t s(ctx_, type);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, static_cast<int>(kPatience / 1ms));
    s.connect(server_->endpoint());
    return s;
  }

  std::vector<std::string> RecvAll(zmq::socket_t& s) {
    std::vector<zmq::message_t> frames;
    EXPECT_TRUE(zmq::recv_multipart(s, std::back_inserter(frames)).has_value());
    std::vector<std::string> out;
    for (auto& f : frames) out.push_back(f.to_string());
    return out;
  }

  static void SendAll(zmq::socket_t& s, const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      s.send(zmq::buffer(frames[i]),
             i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }

  zmq::context_t ctx_;
  Handler handler_;
  std::unique_ptr<ControlServer> server_;
};

TEST_F(ControlTest, ReqClient) {
  zmq::socket_t req = Raw(zmq::socket_type::req);
  SendAll(req, {R"({"id":1,"cmd":"status"})"});
  ServeOne();
  std::vector<std::string> reply = RecvAll(req);  // REQ strips the delimiter
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(json::parse(reply[0]),
            json::parse(R"({"id":1,"ok":true,"result":{"state":"running","step":3}})"));
}

TEST_F(ControlTest, DealerWithDelimiterGetsOneBack) {
  zmq::socket_t dealer = Raw(zmq::socket_type::dealer);
  SendAll(dealer, {"", R"({"id":"a","cmd":"echo","args":{"x":1}})"});
  ServeOne();
  std::vector<std::string> reply = RecvAll(dealer);
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(reply[0], "");
  json j = json::parse(reply[1]);
  EXPECT_EQ(j["id"], "a");
  EXPECT_EQ(j["result"]["args"], json({{"x", 1}}));
}

TEST_F(ControlTest, DealerWithoutDelimiterIsAnsweredInKind) {
  zmq::socket_t dealer = Raw(zmq::socket_type::dealer);
  SendAll(dealer, {R"({"id":2,"cmd":"status"})"});
  ServeOne();
  std::vector<std::string> reply = RecvAll(dealer);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(json::parse(reply[0])["ok"], true);
}

TEST_F(ControlTest, MalformedRequestsGetErrorsWithoutReachingTheHandler) {
  zmq::socket_t dealer = Raw(zmq::socket_type::dealer);
  struct Case {
    std::vector<std::string> frames;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {{"", "{oops"}, "not valid JSON"},
      {{"", R"({"id":5,"args":{}})"}, "'cmd'"},
      {{"", R"({"id":6,"cmd":["status"]})"}, "'cmd' must be a string"},
      {{"", R"({"cmd":"echo","args":[1]})"}, "'args'"},
      {{"", "a", "b"}, "exactly one frame"},
      {{""}, "got 0"},
      {{"", std::string(kMaxRequestBytes + 1, ' ')}, "limit"},
  };
  for (const Case& c : cases) {
    SendAll(dealer, c.frames);
    ServeOne();
    std::vector<std::string> reply = RecvAll(dealer);
    ASSERT_EQ(reply.size(), 2u);
    Result<CommandReply> r = DecodeReply(reply[1]);
    ASSERT_THAT(r, IsOk());
    EXPECT_FALSE(r->ok);
    EXPECT_EQ(r->error_code, "INVALID_ARGUMENT") << c.message_part;
    EXPECT_THAT(r->error_message, HasSubstr(c.message_part));
  }
  EXPECT_EQ(handler_.calls, 0);

  // The id of an undecodable request is echoed when it can be read.
  SendAll(dealer, {"", R"({"id":77,"cmd":3})"});
  ServeOne();
  EXPECT_EQ(json::parse(RecvAll(dealer)[1])["id"], 77);

  // And the server still serves.
  SendAll(dealer, {"", R"({"id":8,"cmd":"status"})"});
  ServeOne();
  EXPECT_EQ(json::parse(RecvAll(dealer)[1])["ok"], true);
  EXPECT_EQ(handler_.calls, 1);
}

TEST_F(ControlTest, ThrowingHandlerIsInternalAndServerSurvives) {
  zmq::socket_t req = Raw(zmq::socket_type::req);
  SendAll(req, {R"({"id":1,"cmd":"boom"})"});
  ServeOne();
  Result<CommandReply> r = DecodeReply(RecvAll(req)[0]);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->id, 1);
  EXPECT_EQ(r->error_code, "INTERNAL");
  EXPECT_THAT(r->error_message, AllOf(HasSubstr("boom"), HasSubstr("kaboom")));

  SendAll(req, {R"({"id":2,"cmd":"status"})"});
  ServeOne();
  EXPECT_EQ(json::parse(RecvAll(req)[0])["ok"], true);
}

TEST_F(ControlTest, ServeIsNonBlockingAndBounded) {
  EXPECT_EQ(server_->Serve(handler_.fn()), 0);
  EXPECT_EQ(server_->ServeFor(handler_.fn(), 10ms), 0);
  zmq::socket_t dealer = Raw(zmq::socket_type::dealer);
  for (int i = 0; i < 3; ++i) SendAll(dealer, {"", R"({"cmd":"status"})"});
  int answered = 0;
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (answered < 3 && std::chrono::steady_clock::now() < deadline) {
    answered += server_->ServeFor(handler_.fn(), 100ms, /*max=*/1);
  }
  EXPECT_EQ(answered, 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(json::parse(RecvAll(dealer)[1]).at("id").is_null());
}

// Runs the server on its own thread, as the engine does.
class ServingThread {
 public:
  ServingThread(ControlServer& server, Handler& handler)
      : thread_([&server, &handler](std::stop_token stop) {
          while (!stop.stop_requested()) server.ServeFor(handler.fn(), 20ms);
        }) {}

 private:
  std::jthread thread_;
};

TEST_F(ControlTest, ClientRoundTrip) {
  ServingThread serving(*server_, handler_);
  auto client = ControlClient::Connect(server_->endpoint());
  ASSERT_THAT(client, IsOk());
  Result<CommandReply> r = (*client)->Call(Req("status"), kPatience);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->ok);
  EXPECT_EQ(r->id, 1);
  EXPECT_EQ(r->result["state"], "running");

  r = (*client)->Call(Req("fly"), kPatience);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->id, 2);
  EXPECT_FALSE(r->ok);
  EXPECT_EQ(r->error_code, "NOT_FOUND");

  r = (*client)->Call(Req("echo", {{"k", "v"}}, "mine"), kPatience);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->id, "mine");
  EXPECT_EQ(r->result["args"]["k"], "v");
}

TEST_F(ControlTest, ClientTimeoutThenLaterCallWorks) {
  auto client = ControlClient::Connect(server_->endpoint());
  ASSERT_THAT(client, IsOk());
  // Nobody serves yet: the request waits in the server's queue.
  EXPECT_THAT(
      (*client)->Call(Req("status"), 100ms),
      StatusIs(StatusCode::kUnavailable,
               AllOf(HasSubstr(server_->endpoint()), HasSubstr("100 ms"), HasSubstr("'status'"))));
  // Now the server answers both the stale request and the new one; the
  // client must hand back only the reply to the new one.
  ServingThread serving(*server_, handler_);
  Result<CommandReply> r = (*client)->Call(Req("echo"), kPatience);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->id, 2);
  EXPECT_EQ(r->result["cmd"], "echo");
}

TEST(ControlClientTest, NoServerIsUnavailable) {
  // An ipc path nobody binds: unlike a freed tcp port, no other test can take it.
  const std::string endpoint =
      "ipc://" + ::testing::TempDir() + "sy-no-server-" + std::to_string(::getpid());
  auto client = ControlClient::Connect(endpoint);
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(
      (*client)->Call(Req("status"), 50ms),
      StatusIs(StatusCode::kUnavailable, AllOf(HasSubstr("could not send"), HasSubstr(endpoint))));
}

TEST(ControlServerTest, BindFailureIsUnavailable) {
  auto first = ControlServer::Bind("tcp://127.0.0.1:*");
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(ControlServer::Bind((*first)->endpoint()),
              StatusIs(StatusCode::kUnavailable, HasSubstr("in use")));
  EXPECT_THAT(ControlClient::Connect("nonsense"), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace sy::telemetry
