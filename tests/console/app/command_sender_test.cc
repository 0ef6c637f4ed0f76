#include "console/app/command_sender.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "tests/console/app/test_store.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using ::sy::console::testing::TempDir;
using ::testing::HasSubstr;

// Collects outcomes from the sender thread.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<CommandOutcome> got;
  CommandSender::OnDone fn() {
    return [this](const CommandOutcome& o) {
      std::lock_guard lock(mu);
      got.push_back(o);
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [&] { return got.size() >= n; });
  }
};

TEST(ConsoleCommandSender, SendsAndDeliversReplies) {
  TempDir dir;
  const std::string ep = "ipc://" + (dir / "ctl");
  auto server = telemetry::ControlServer::Bind(ep);
  ASSERT_THAT(server, IsOk());
  std::atomic<bool> stop{false};
  std::thread serve([&] {
    while (!stop) {
      (*server)->ServeFor(
          [](const telemetry::CommandRequest& r) {
            if (r.cmd == "trace") {
              return telemetry::OkReply(r.id, {{"level", r.args.value("level", "")}});
            }
            return telemetry::ErrorReply(r.id, NotFound("no such command " + r.cmd));
          },
          50ms);
    }
  });
  Inbox inbox;
  {
    auto sender = CommandSender::Start(ep, 5s, inbox.fn());
    ASSERT_THAT(sender, IsOk());
    (*sender)->Send(*ParseCommand("trace full"));
    (*sender)->Send(*ParseCommand("pause"));
    ASSERT_TRUE(inbox.WaitFor(2));
  }
  stop = true;
  serve.join();
  ASSERT_THAT(inbox.got[0].reply, IsOk());
  EXPECT_TRUE(inbox.got[0].reply->ok);
  EXPECT_EQ(inbox.got[0].reply->result["level"], "full");
  EXPECT_THAT(inbox.got[0].request_json, HasSubstr("\"cmd\":\"trace\""));
  EXPECT_GT(inbox.got[0].sent_unix_ms, 0);
  ASSERT_THAT(inbox.got[1].reply, IsOk());
  EXPECT_FALSE(inbox.got[1].reply->ok);
  EXPECT_EQ(inbox.got[1].reply->error_code, "NOT_FOUND");
  // Each request carried its own id.
  EXPECT_NE(inbox.got[0].reply->id, inbox.got[1].reply->id);
}

TEST(ConsoleCommandSender, NoEngineTimesOutAsUnavailable) {
  TempDir dir;
  Inbox inbox;
  auto sender = CommandSender::Start("ipc://" + (dir / "nobody"), 200ms, inbox.fn());
  ASSERT_THAT(sender, IsOk());
  (*sender)->Send(*ParseCommand("status"));
  ASSERT_TRUE(inbox.WaitFor(1));
  EXPECT_THAT(inbox.got[0].reply, StatusIs(StatusCode::kUnavailable));
}

TEST(ConsoleCommandSender, BadEndpointIsRejected) {
  EXPECT_THAT(CommandSender::Start("nonsense://x", 100ms, [](const CommandOutcome&) {}),
              StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace sy::console
