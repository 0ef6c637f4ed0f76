// Several engines: endpoints from the --connect flags, two real engines'
// sockets (telemetry Publisher and ControlServer, over ZeroMQ ipc) recorded by
// one EngineSet into one store as two runs of one session, and the
// Controller's engine selection routing commands to the right engine.
#include "console/app/engine_set.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "console/app/controller.h"
#include "telemetry/control.h"
#include "telemetry/publisher.h"
#include "tests/console/app/test_store.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using ::sy::console::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

template <typename Pred>
bool Eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

Effects Press(Controller& c, const std::string& key) { return c.HandleKey(Key{key}); }

Effects TypeLine(Controller& c, const std::string& line) {
  Press(c, ":");
  for (char ch : line) Press(c, ch == ' ' ? "Space" : std::string(1, ch));
  return Press(c, "Enter");
}

TEST(ConsoleResolveEngines, FlagsToEndpoints) {
  // No --connect: the defaults; --control still applies to the one engine.
  auto none = ResolveEngines({}, std::nullopt);
  ASSERT_THAT(none, IsOk());
  ASSERT_EQ(none->size(), 1u);
  EXPECT_EQ((*none)[0].telemetry, "tcp://127.0.0.1:5555");
  EXPECT_EQ((*none)[0].control, "tcp://127.0.0.1:5556");
  auto one = ResolveEngines({"ipc:///tmp/t"}, std::string("ipc:///tmp/c"));
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ((*one)[0].control, "ipc:///tmp/c");
  // Several: CONTROL after the comma, or tcp PORT+1.
  auto two = ResolveEngines({"ipc:///tmp/a,ipc:///tmp/actl", "tcp://10.0.0.2:6000"}, std::nullopt);
  ASSERT_THAT(two, IsOk());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].telemetry, "ipc:///tmp/a");
  EXPECT_EQ((*two)[0].control, "ipc:///tmp/actl");
  EXPECT_EQ((*two)[1].telemetry, "tcp://10.0.0.2:6000");
  EXPECT_EQ((*two)[1].control, "tcp://10.0.0.2:6001");

  EXPECT_THAT(ResolveEngines({"ipc:///tmp/a", "ipc:///tmp/b"}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--connect 'ipc:///tmp/a'")));
  EXPECT_THAT(ResolveEngines({"tcp://h:1", "tcp://h:3"}, std::string("tcp://h:2")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ambiguous with 2 engines")));
  EXPECT_THAT(ResolveEngines({"tcp://h:1", "tcp://h:1"}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("given twice")));
  EXPECT_THAT(ResolveEngines({",tcp://h:2"}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty TELEMETRY")));
  EXPECT_THAT(ResolveEngines({"tcp://h:1,"}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty CONTROL")));
  EXPECT_THAT(ResolveEngines({"tcp://h:1,tcp://h:2,tcp://h:3"}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("TELEMETRY[,CONTROL]")));
}

TEST(ConsoleEngineSelection, KeysAndCommandPickTheEngine) {
  Controller c(false);
  c.mutable_view().engine_count = 3;
  EXPECT_EQ(c.view().engine, -1);
  Press(c, "e");
  EXPECT_EQ(c.view().engine, 0);
  EXPECT_EQ(c.view().message, "showing engine 1 of 3");
  Press(c, "e");
  Press(c, "e");
  EXPECT_EQ(c.view().engine, 2);
  Press(c, "e");
  EXPECT_EQ(c.view().engine, -1);  // all
  EXPECT_EQ(c.view().message, "showing all 3 engines");
  Press(c, "E");
  EXPECT_EQ(c.view().engine, 2);
  TypeLine(c, "engine 2");
  EXPECT_EQ(c.view().engine, 1);
  TypeLine(c, "engine all");
  EXPECT_EQ(c.view().engine, -1);
  TypeLine(c, "engine 4");
  EXPECT_EQ(c.view().engine, -1);
  EXPECT_TRUE(c.view().message_error);
  EXPECT_EQ(c.view().message, "no engine 4: connected are 1..3 (or all)");
  TypeLine(c, "engine 0");
  EXPECT_THAT(c.view().message, HasSubstr("bad engine '0'"));
}

TEST(ConsoleEngineSelection, OneEngineHasNothingToSelect) {
  Controller c(false);
  Press(c, "e");
  EXPECT_EQ(c.view().engine, -1);
  const Effects fx = TypeLine(c, "stop!");
  ASSERT_TRUE(fx.send);
  EXPECT_EQ(fx.engine, -1);  // the one engine
}

TEST(ConsoleEngineSelection, DisruptiveCommandsNeedOneEngine) {
  Controller c(false);
  c.mutable_view().engine_count = 2;
  // Ordinary commands go to every engine.
  const Effects trace = TypeLine(c, "trace full");
  ASSERT_TRUE(trace.send);
  EXPECT_EQ(trace.engine, -1);
  // Disruptive ones (they ask y/n, or take '!') and rebalance previews do not.
  for (const char* line : {"stop", "stop!", "rebalance", "rebalance! 8", "flush_cache"}) {
    const Effects fx = TypeLine(c, line);
    EXPECT_FALSE(fx.send) << line;
    EXPECT_TRUE(c.view().confirm.empty()) << line;
    EXPECT_TRUE(c.view().message_error) << line;
    EXPECT_THAT(c.view().message, HasSubstr("pick it first")) << line;
  }
  // Picked: the question names the engine and 'y' sends there.
  TypeLine(c, "engine 2");
  EXPECT_FALSE(TypeLine(c, "stop").send);
  EXPECT_EQ(c.view().confirm, "Really stop the engine 2? (y/n)");
  const Effects yes = Press(c, "y");
  ASSERT_TRUE(yes.send);
  EXPECT_EQ(yes.send->request.cmd, "stop");
  EXPECT_EQ(yes.engine, 1);
  // A question one engine raised is answered to that engine, whatever is shown.
  TypeLine(c, "engine all");
  c.Ask("engine 1: apply? (y/n)", *ParseCommand("rebalance!"), 0);
  const Effects apply = Press(c, "y");
  ASSERT_TRUE(apply.send);
  EXPECT_EQ(apply.engine, 0);
}

// One engine as the console sees it: a real telemetry Publisher and a real
// ControlServer answering on its own thread, recording the commands it got.
class TestEngine {
 public:
  TestEngine(const std::string& pub_ep, const std::string& ctl_ep, const std::string& run) {
    telemetry::PublisherOptions o;
    o.endpoint = pub_ep;
    o.heartbeat_ms = 50;
    o.meta_ms = 100;
    auto p = telemetry::Publisher::Start(o, run, std::chrono::steady_clock::now());
    EXPECT_THAT(p, IsOk());
    pub_ = std::move(p).value();
    telemetry::Meta meta;
    meta.model.preset = "tiny-moe";
    meta.devices = 2;
    meta.layout = "EP";
    meta.trace_level = "summary";
    pub_->SetMeta(meta);
    pub_->SetState("running", 0);
    auto server = telemetry::ControlServer::Bind(ctl_ep);
    EXPECT_THAT(server, IsOk());
    server_ = std::move(server).value();
    serve_ = std::thread([this] {
      while (!stop_) {
        server_->ServeFor(
            [this](const telemetry::CommandRequest& r) {
              std::lock_guard l(mu_);
              got_.push_back(r.cmd);
              return telemetry::OkReply(r.id, {{"cmd", r.cmd}});
            },
            20ms);
      }
    });
  }
  ~TestEngine() {
    stop_ = true;
    serve_.join();
  }
  void Step(int64_t step, int decode_tokens) {
    telemetry::Step st;
    st.step = step;
    st.decode_tokens = decode_tokens;
    pub_->Publish(st);
  }
  std::vector<std::string> got() {
    std::lock_guard l(mu_);
    return got_;
  }

 private:
  std::unique_ptr<telemetry::Publisher> pub_;
  std::unique_ptr<telemetry::ControlServer> server_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> got_;
  std::thread serve_;
};

TEST(ConsoleEngineSet, TwoEnginesTwoRunsOneSessionAndCommandsRouted) {
  TempDir dir;
  const std::string db = dir / "runs.db";
  const std::string pub_a = "ipc://" + (dir / "a.pub"), ctl_a = "ipc://" + (dir / "a.ctl");
  const std::string pub_b = "ipc://" + (dir / "b.pub"), ctl_b = "ipc://" + (dir / "b.ctl");
  TestEngine a(pub_a, ctl_a, "run-a");
  TestEngine b(pub_b, ctl_b, "run-b");

  auto endpoints = ResolveEngines({pub_a + "," + ctl_a, pub_b + "," + ctl_b}, std::nullopt);
  ASSERT_THAT(endpoints, IsOk());
  EngineSetOptions o;
  o.engines = *endpoints;
  o.db_path = db;
  o.command_timeout = 5s;
  auto started = EngineSet::Start(o);
  ASSERT_THAT(started, IsOk());
  EngineSet& set = **started;
  ASSERT_EQ(set.size(), 2);
  EXPECT_THAT(set.names(), ElementsAre(pub_a, pub_b));

  // Different traffic per engine, so each collector shows its own.
  int64_t step = 0;
  ASSERT_TRUE(Eventually([&] {
    a.Step(step, 5);
    b.Step(step, 7);
    ++step;
    const std::vector<Snapshot> s = set.TakeSnapshots();
    return s[0].steps_seen >= 3 && s[1].steps_seen >= 3 && s[0].have_meta && s[1].have_meta;
  }));
  {
    const std::vector<Snapshot> s = set.TakeSnapshots();
    EXPECT_EQ(s[0].run, "run-a");
    EXPECT_EQ(s[1].run, "run-b");
  }

  // The operator picks engine 2 and pauses it: only engine 2 hears it.
  Controller ctl(false);
  ctl.mutable_view().engine_count = set.size();
  Press(ctl, "e");
  Press(ctl, "e");
  Effects fx = TypeLine(ctl, "pause");
  ASSERT_TRUE(fx.send);
  set.Send(fx.engine, *fx.send);
  std::vector<std::pair<std::string, bool>> msgs;
  ASSERT_TRUE(Eventually([&] {
    for (auto& m : set.TakeCommandMessages()) msgs.push_back(m);
    return !msgs.empty();
  }));
  EXPECT_EQ(msgs[0].first, "engine 2: :pause ok {\"cmd\":\"pause\"}");
  EXPECT_THAT(b.got(), ElementsAre("pause"));
  EXPECT_THAT(a.got(), IsEmpty());

  // All engines selected: a status request goes to both.
  Press(ctl, "e");
  ASSERT_EQ(ctl.view().engine, -1);
  fx = TypeLine(ctl, "status");
  ASSERT_TRUE(fx.send);
  set.Send(fx.engine, *fx.send);
  ASSERT_TRUE(Eventually([&] { return a.got().size() == 1 && b.got().size() == 2; }));
  EXPECT_THAT(a.got(), ElementsAre("status"));
  EXPECT_THAT(b.got(), ElementsAre("pause", "status"));

  const LiveSummary sum = set.Finish();
  EXPECT_GT(sum.received, 0);
  EXPECT_GT(sum.written, 0);
  EXPECT_EQ(sum.dropped, 0);
  EXPECT_EQ(sum.store_error, "");
  started->reset();  // closes the store

  auto reader = store::Reader::Open(db);
  ASSERT_THAT(reader, IsOk());
  auto runs = (*reader)->ListRuns();
  ASSERT_THAT(runs, IsOk());
  ASSERT_EQ(runs->size(), 2u);
  const store::RunInfo& r0 = (*runs)[0];
  const store::RunInfo& r1 = (*runs)[1];
  EXPECT_NE(r0.id, r1.id);
  EXPECT_GT(r0.session_id, 0);
  EXPECT_EQ(r0.session_id, r1.session_id);
  for (const auto& r : *runs) EXPECT_GE(r.steps, 3) << r.id;
  // Each command is recorded on the run of the engine it went to.
  auto cmds_a = (*reader)->Commands("run-a");
  auto cmds_b = (*reader)->Commands("run-b");
  ASSERT_THAT(cmds_a, IsOk());
  ASSERT_THAT(cmds_b, IsOk());
  ASSERT_EQ(cmds_a->size(), 1u);
  EXPECT_EQ((*cmds_a)[0].text, "status");
  ASSERT_EQ(cmds_b->size(), 2u);
  EXPECT_EQ((*cmds_b)[0].text, "pause");
}

}  // namespace
}  // namespace sy::console
