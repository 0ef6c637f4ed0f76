#include "console/app/live_session.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "store/paths.h"
#include "telemetry/control.h"
#include "telemetry/publisher.h"
#include "tests/console/app/test_store.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using ::sy::console::testing::TempDir;
using ::testing::HasSubstr;

// Polls `pred` until it holds or 10 s pass (a liveness bound, not a speed test).
template <typename Pred>
bool Eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

class ConsoleLiveSession : public ::testing::Test {
 protected:
  void SetUp() override {
    pub_ep_ = "ipc://" + (dir_ / "pub");
    ctl_ep_ = "ipc://" + (dir_ / "ctl");
    db_ = dir_ / "sub/runs.db";
    ASSERT_THAT(store::EnsureParentDir(db_), IsOk());
  }
  std::unique_ptr<telemetry::Publisher> StartPublisher(int heartbeat_ms = 50) {
    telemetry::PublisherOptions o;
    o.endpoint = pub_ep_;
    o.heartbeat_ms = heartbeat_ms;
    o.meta_ms = 100;
    auto p = telemetry::Publisher::Start(o, "live-run", std::chrono::steady_clock::now());
    EXPECT_THAT(p, IsOk());
    telemetry::Meta meta;
    meta.model.preset = "tiny-moe";
    meta.devices = 2;
    meta.layout = "EP";
    meta.trace_level = "summary";
    (*p)->SetMeta(meta);
    (*p)->SetState("running", 0);
    return std::move(p).value();
  }
  static bool LogHas(LiveSession& s, const std::string& text) {
    for (const auto& l : s.collector().TakeSnapshot().log) {
      if (l.text == text) return true;
    }
    return false;
  }
  // Ends the session (closing its store) and reads back the run's status.
  std::string FinishAndReadStatus(Result<std::unique_ptr<LiveSession>>& live) {
    (*live)->Finish();
    live->reset();
    auto reader = store::Reader::Open(db_);
    EXPECT_THAT(reader, IsOk());
    if (!reader.ok()) return "";
    auto run = (*reader)->GetRun("live-run");
    EXPECT_THAT(run, IsOk());
    return run.ok() ? run->status : "";
  }
  LiveOptions Options() {
    LiveOptions o;
    o.connect = pub_ep_;
    o.control = ctl_ep_;
    o.db_path = db_;
    o.command_timeout = 5s;
    return o;
  }
  TempDir dir_;
  std::string pub_ep_, ctl_ep_, db_;
};

TEST_F(ConsoleLiveSession, ReceivesRecordsAndSendsCommands) {
  auto pub = StartPublisher();
  auto server = telemetry::ControlServer::Bind(ctl_ep_);
  ASSERT_THAT(server, IsOk());
  std::atomic<bool> stop{false};
  std::thread serve([&] {
    while (!stop) {
      (*server)->ServeFor(
          [&](const telemetry::CommandRequest& r) {
            if (r.cmd == "pause") pub->SetState("paused", 0);
            return telemetry::OkReply(r.id, {{"paused", r.cmd == "pause"}});
          },
          20ms);
    }
  });
  auto live = LiveSession::Start(Options());
  ASSERT_THAT(live, IsOk());
  LiveSession& s = **live;
  // PUB/SUB drops what is sent before the subscription lands: keep stepping
  // until the console has seen steps.
  int64_t step = 0;
  ASSERT_TRUE(Eventually([&] {
    telemetry::Step st;
    st.step = step++;
    st.decode_tokens = 5;
    pub->Publish(st);
    return s.collector().TakeSnapshot().steps_seen >= 3;
  }));
  ASSERT_TRUE(Eventually([&] { return s.collector().TakeSnapshot().have_meta; }));
  EXPECT_EQ(s.collector().TakeSnapshot().run, "live-run");
  EXPECT_EQ(s.collector().TakeSnapshot().conn, ConnState::kLive);

  s.SendCommand(*ParseCommand("pause"));
  std::vector<std::pair<std::string, bool>> msgs;
  ASSERT_TRUE(Eventually([&] {
    for (auto& m : s.TakeCommandMessages()) msgs.push_back(m);
    return !msgs.empty();
  }));
  EXPECT_EQ(msgs[0].first, ":pause ok {\"paused\":true}");
  EXPECT_FALSE(msgs[0].second);
  EXPECT_TRUE(s.collector().TakeSnapshot().paused);
  const Snapshot snap = s.collector().TakeSnapshot();
  bool logged = false;
  for (const auto& l : snap.log) logged = logged || l.text == "< :pause ok {\"paused\":true}";
  EXPECT_TRUE(logged);

  const LiveSummary sum = s.Finish();
  EXPECT_GT(sum.received, 0);
  EXPECT_GT(sum.written, 0);
  EXPECT_EQ(sum.dropped, 0);
  EXPECT_EQ(sum.store_error, "");
  stop = true;
  serve.join();
  live->reset();

  auto reader = store::Reader::Open(db_);
  ASSERT_THAT(reader, IsOk());
  auto cmds = (*reader)->Commands("live-run");
  ASSERT_THAT(cmds, IsOk());
  ASSERT_EQ(cmds->size(), 1u);
  EXPECT_EQ((*cmds)[0].text, "pause");
  EXPECT_TRUE((*cmds)[0].ok);
  EXPECT_THAT((*cmds)[0].reply, HasSubstr("\"paused\":true"));
  auto run = (*reader)->GetRun("live-run");
  ASSERT_THAT(run, IsOk());
  EXPECT_GE(run->steps, 3);
}

TEST_F(ConsoleLiveSession, LostEngineMarksRunAbnormal) {
  auto pub = StartPublisher(/*heartbeat_ms=*/50);
  auto live = LiveSession::Start(Options());
  ASSERT_THAT(live, IsOk());
  LiveSession& s = **live;
  ASSERT_TRUE(Eventually([&] { return s.collector().TakeSnapshot().conn == ConnState::kLive; }));
  EXPECT_FALSE(s.run_over());
  pub.reset();  // the engine goes away: heartbeats stop
  ASSERT_TRUE(Eventually([&] { return s.collector().TakeSnapshot().conn == ConnState::kLost; }));
  ASSERT_TRUE(Eventually([&] { return LogHas(s, "run live-run marked abnormal: engine lost"); }));
  EXPECT_TRUE(s.run_over());
  EXPECT_FALSE(s.stop_seen());
  EXPECT_EQ(FinishAndReadStatus(live), "abnormal");
}

TEST_F(ConsoleLiveSession, StopEventEndsRunNormally) {
  auto pub = StartPublisher();
  auto live = LiveSession::Start(Options());
  ASSERT_THAT(live, IsOk());
  LiveSession& s = **live;
  ASSERT_TRUE(Eventually([&] { return s.collector().TakeSnapshot().conn == ConnState::kLive; }));
  telemetry::Event stop;
  stop.kind = "lifecycle";
  stop.name = "stop";
  stop.message = "stopped by command";
  pub->Publish(stop);
  ASSERT_TRUE(Eventually([&] { return s.stop_seen(); }));
  ASSERT_TRUE(Eventually([&] { return LogHas(s, "run live-run ended"); }));
  EXPECT_TRUE(s.run_over());
  EXPECT_EQ(FinishAndReadStatus(live), "ended");
}

// `:rebalance`: the dry run's plan lands in the Log as a table and raises
// the question; what the question sends applies the same window and policy.
TEST_F(ConsoleLiveSession, RebalanceDryRunShowsThePlanAndAsks) {
  auto server = telemetry::ControlServer::Bind(ctl_ep_);
  ASSERT_THAT(server, IsOk());
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<nlohmann::json> seen;
  std::thread serve([&] {
    while (!stop) {
      (*server)->ServeFor(
          [&](const telemetry::CommandRequest& r) {
            {
              std::lock_guard lock(mu);
              seen.push_back(r.args);
            }
            const bool dry = r.args.value("dry_run", false);
            nlohmann::json plan = {
                {"layers",
                 {{{"layer", 0}, {"before", 0.5}, {"after", 0.9}, {"moved", 3}},
                  {{"layer", 1}, {"before", 1.0}, {"after", 1.0}, {"moved", 0}}}},
                {"experts_moved", 3},
                {"bytes", 3 << 20},
                {"window", 50}};
            return telemetry::OkReply(r.id, {{"plan", plan}, {"started", !dry}});
          },
          20ms);
    }
  });
  LiveOptions o = Options();
  o.db_path = "";
  auto live = LiveSession::Start(o);
  ASSERT_THAT(live, IsOk());
  LiveSession& s = **live;
  s.SendCommand(*ParseCommand("rebalance 50 global"));
  std::vector<LiveSession::Question> questions;
  ASSERT_TRUE(Eventually([&] {
    for (auto& q : s.TakeQuestions()) questions.push_back(std::move(q));
    return !questions.empty();
  }));
  ASSERT_EQ(questions.size(), 1u);
  EXPECT_EQ(questions[0].text, "Apply: 3 experts, 3.00 MiB, balancedness 0.75 -> 0.95? (y/n)");
  EXPECT_EQ(questions[0].command.text, "rebalance! 50 global");
  EXPECT_EQ(questions[0].command.request.args["dry_run"], false);
  EXPECT_TRUE(LogHas(s, "< :rebalance 50 global ok: dry run, 3 experts to move"));
  EXPECT_TRUE(LogHas(s,
                     "plan: 3 experts move (3.00 MiB) in 1 of 2 layers, window 50 steps; "
                     "balancedness 0.75 -> 0.95"));
  EXPECT_TRUE(LogHas(s, "  layer  before  after  moved"));
  EXPECT_TRUE(LogHas(s, "  L0       0.50   0.90      3"));
  EXPECT_TRUE(LogHas(s, "  L1       1.00   1.00      0"));

  // Yes: the apply goes out; its reply raises no further question.
  s.SendCommand(questions[0].command);
  ASSERT_TRUE(Eventually([&] {
    return LogHas(s,
                  "< :rebalance! 50 global ok: started, 3 experts "
                  "to move");
  }));
  EXPECT_TRUE(s.TakeQuestions().empty());
  stop = true;
  serve.join();
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], nlohmann::json::parse(R"({"dry_run":true,"window":50,"policy":"global"})"));
  EXPECT_EQ(seen[1], nlohmann::json::parse(R"({"dry_run":false,"window":50,"policy":"global"})"));
}

TEST_F(ConsoleLiveSession, UnwritableStoreIsAClearError) {
  LiveOptions o = Options();
  o.db_path = "/proc/definitely/not/here.db";
  auto live = LiveSession::Start(o);
  EXPECT_THAT(live, StatusIs(StatusCode::kUnavailable, HasSubstr("/proc/definitely/not/here.db")));
}

TEST_F(ConsoleLiveSession, WithoutStoreStillCollects) {
  auto pub = StartPublisher();
  LiveOptions o = Options();
  o.db_path = "";
  auto live = LiveSession::Start(o);
  ASSERT_THAT(live, IsOk());
  ASSERT_TRUE(Eventually([&] { return (*live)->collector().TakeSnapshot().have_meta; }));
  EXPECT_FALSE((*live)->collector().TakeSnapshot().have_store);
  EXPECT_EQ((*live)->Finish().written, 0);
}

}  // namespace
}  // namespace sy::console
