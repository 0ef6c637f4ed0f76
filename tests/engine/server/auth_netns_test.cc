// The engine bound to a non-loopback address with CURVE (issue 9, "done
// when"): a client without keys gets nothing, an observer subscribes and
// queries but may not command, an operator commands, and the refusals are
// events on the stream; without keys the engine refuses to bind there.
//
// The address is 10.77.0.1 on the loopback device of a network namespace the
// test makes: the test re-runs itself under `unshare --net` (or, unprivileged,
// `unshare --map-root-user --net`) with SY_AUTH_NETNS=1 set, so nothing
// touches the host's network. When the kernel refuses both, it is skipped
// with that reason.
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <vector>

#include "tests/engine/server/engine_fixture.h"
#include "tests/telemetry/curve_fixture.h"

namespace sy::engine {
namespace {

using telemetry::CommandReply;
using telemetry::CommandRequest;
using telemetry::ControlClient;
using telemetry::CurveClient;
using telemetry::Subscriber;
using ::testing::HasSubstr;

constexpr const char* kAddress = "10.77.0.1";
const std::string kPub = std::string("tcp://") + kAddress + ":25555";
const std::string kCtl = std::string("tcp://") + kAddress + ":25556";

int ExitCode(int rc) { return rc == -1 ? -1 : (WIFEXITED(rc) ? WEXITSTATUS(rc) : 128); }

// "" if `unshare` works with these flags here, else why not.
std::string ProbeUnshare(const std::string& flags) {
  const int rc = std::system(("unshare " + flags + " true >/dev/null 2>&1").c_str());
  return ExitCode(rc) == 0 ? ""
                           : "`unshare " + flags + " true` exited " + std::to_string(ExitCode(rc));
}

EngineOptions SecuredOptions(std::optional<telemetry::CurveServer> curve) {
  EngineOptions o;
  o.model = SmallModel();
  o.runner = {.devices = 2, .seed = 3, .kv_pages_per_device = 64, .page_size = 16};
  o.scheduler.max_batch_tokens = 64;
  o.scheduler.max_running = 16;
  o.workload_enabled = false;
  o.publisher.endpoint = kPub;
  o.publisher.heartbeat_ms = 50;
  o.control_endpoint = kCtl;
  o.run_id = "auth-netns";
  o.curve = std::move(curve);
  return o;
}

std::unique_ptr<Subscriber> Subscribe(std::optional<CurveClient> curve) {
  Result<std::unique_ptr<Subscriber>> s =
      Subscriber::Connect({.endpoint = kPub, .rcvhwm = 100000, .curve = std::move(curve)});
  EXPECT_THAT(s.status(), IsOk());
  return s.ok() ? std::move(s).value() : nullptr;
}

Result<CommandReply> Call(std::optional<CurveClient> curve, const std::string& cmd,
                          std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(auto client, ControlClient::Connect(kCtl, std::move(curve)));
  CommandRequest req;
  req.cmd = cmd;
  return client->Call(req, timeout);
}

// Receives until `pred` holds or `wait` passes; counts what arrived.
bool Receive(Subscriber& sub, std::chrono::milliseconds wait,
             const std::function<bool(const telemetry::Message&)>& pred, int* received) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    Result<std::optional<telemetry::Message>> m = sub.Receive(50ms);
    if (!m.ok() || !m->has_value()) continue;
    ++*received;
    if (pred(**m)) return true;
  }
  return false;
}

// The body, run inside the namespace.
void RunInNamespace() {
  ASSERT_EQ(ExitCode(std::system("ip link set lo up && ip addr add 10.77.0.1/32 dev lo")), 0)
      << "cannot configure the namespace's loopback (iproute2 installed?)";
  ASSERT_TRUE(telemetry::CurveAvailable());
  const telemetry::TestKeys keys = telemetry::TestKeys::Make();

  // Without keys: refused, naming the endpoint and the flags.
  EXPECT_THAT(Engine::Create(SecuredOptions(std::nullopt)).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       testing::AllOf(HasSubstr(kPub), HasSubstr("--server-key"),
                                      HasSubstr("--authorized-keys"))));

  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(SecuredOptions(keys.Server(nullptr))));
  std::future<Status> run = std::async(std::launch::async, [&] { return engine->Run(); });

  auto observer = Subscribe(keys.Client(keys.observer));
  ASSERT_TRUE(observer);
  int n = 0;
  ASSERT_TRUE(Receive(
      *observer, kPatience, [](const telemetry::Message&) { return true; }, &n))
      << "the observer gets no telemetry";
  // Only now, so that the observer is there to see the refusal events.
  auto keyless = Subscribe(std::nullopt);
  auto stranger = Subscribe(keys.Client(keys.stranger));
  ASSERT_TRUE(keyless && stranger);

  // No keys, or a key not in the allow-list: no telemetry, commands time out.
  EXPECT_THAT(Call(std::nullopt, "status", 1s).status(), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(Call(keys.Client(keys.stranger), "status", 1s).status(),
              StatusIs(StatusCode::kUnavailable));
  int keyless_got = 0, stranger_got = 0;
  Receive(
      *keyless, 1s, [](const telemetry::Message&) { return false; }, &keyless_got);
  Receive(
      *stranger, 1s, [](const telemetry::Message&) { return false; }, &stranger_got);
  EXPECT_EQ(keyless_got, 0);
  EXPECT_EQ(stranger_got, 0);

  // The observer queries but may not command.
  ASSERT_OK_AND_ASSIGN(CommandReply status, Call(keys.Client(keys.observer), "status", kPatience));
  EXPECT_TRUE(status.ok) << status.error_message;
  EXPECT_EQ(status.result.value("state", ""), "running");
  ASSERT_OK_AND_ASSIGN(CommandReply denied, Call(keys.Client(keys.observer), "pause", kPatience));
  EXPECT_FALSE(denied.ok);
  EXPECT_EQ(denied.error_code, "PERMISSION_DENIED");
  EXPECT_THAT(denied.error_message, HasSubstr("operator role"));

  // The operator commands.
  ASSERT_OK_AND_ASSIGN(CommandReply paused, Call(keys.Client(keys.op), "pause", kPatience));
  EXPECT_TRUE(paused.ok) << paused.error_message;
  EXPECT_EQ(paused.result.value("state", ""), "paused");

  // The refusals are on the stream the observer reads.
  bool command_refused = false, key_refused = false, keyless_refused = false, op_paused = false;
  const auto pred = [&](const telemetry::Message& m) {
    if (auto* e = std::get_if<telemetry::Event>(&m)) {
      if (e->kind == "security" && e->name == "command_refused" &&
          e->detail.value("cmd", "") == "pause" &&
          e->detail.value("user", "") == "observer:dashboard" &&
          e->detail["error"].value("code", "") == "PERMISSION_DENIED") {
        command_refused = true;
      }
      if (e->kind == "security" && e->name == "connection_refused") {
        if (e->detail.value("public_key", "") == keys.stranger.public_key) key_refused = true;
        if (e->detail.value("public_key", "x").empty()) keyless_refused = true;
      }
      if (e->kind == "command" && e->name == "pause" && e->phase == "done") op_paused = true;
    }
    return command_refused && key_refused && keyless_refused && op_paused;
  };
  // A keyless client gives up after its one failed handshake, and when it
  // resets the connection before the server has read its greeting, libzmq
  // reports no mismatch (HANDSHAKE_FAILED_NO_DETAIL, not published: mostly
  // peers that hung up). Under load that can happen to the two attempts
  // above, so another keyless client knocks each second until one is seen.
  std::vector<std::unique_ptr<Subscriber>> knocking;
  bool all = false;
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!all && std::chrono::steady_clock::now() < deadline) {
    all = Receive(*observer, 1s, pred, &n);
    if (!keyless_refused) knocking.push_back(Subscribe(std::nullopt));
  }
  EXPECT_TRUE(all) << "command_refused=" << command_refused << " key_refused=" << key_refused
                   << " keyless_refused=" << keyless_refused << " op_paused=" << op_paused;

  engine->RequestStop();
  EXPECT_THAT(run.get(), IsOk());
}

TEST(AuthNetnsTest, EngineOnANonLoopbackAddressAdmitsOnlyItsKeys) {
  if (std::getenv("SY_AUTH_NETNS") != nullptr) {
    RunInNamespace();
    return;
  }
  std::string flags = "--net";
  std::string why = ProbeUnshare(flags);
  if (!why.empty()) {
    flags = "--map-root-user --net";
    const std::string why_user = ProbeUnshare(flags);
    if (!why_user.empty()) {
      GTEST_SKIP() << "the kernel refuses a network namespace: " << why << "; " << why_user;
    }
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd =
      "unshare " + flags + " env SY_AUTH_NETNS=1 '" + self +
      "' --gtest_filter=AuthNetnsTest.EngineOnANonLoopbackAddressAdmitsOnlyItsKeys";
  EXPECT_EQ(ExitCode(std::system(cmd.c_str())), 0)
      << "the test failed inside the namespace (its output is above): " << cmd;
}

}  // namespace
}  // namespace sy::engine
