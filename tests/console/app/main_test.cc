// Runs the real moe-console binary: flags, replay modes, headless recording.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "console/draw/grid.h"
#include "telemetry/publisher.h"
#include "tests/console/app/test_store.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using ::sy::console::testing::TempDir;
using ::sy::console::testing::WriteSyntheticRun;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Process {
 public:
  Process(const TempDir& dir, std::vector<std::string> args, std::vector<std::string> env = {})
      : out_(dir / "stdout"), err_(dir / "stderr") {
    args.insert(args.begin(), MOE_CONSOLE_BIN);
    pid_ = fork();
    if (pid_ == 0) {
      const int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(o, 1);
      dup2(e, 2);
      const int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
      for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  void Signal(int sig) { kill(pid_, sig); }
  // Waits up to 20 s (then kills: a hang fails the test, it does not block it).
  Outcome Wait() {
    Outcome r;
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        r.err = "killed after timeout";
        return r;
      }
      std::this_thread::sleep_for(10ms);
    }
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = Slurp(out_);
    r.err = Slurp(err_);
    return r;
  }

 private:
  std::string out_, err_;
  pid_t pid_;
};

Outcome RunConsole(const TempDir& dir, std::vector<std::string> args,
                   std::vector<std::string> env = {}) {
  return Process(dir, std::move(args), std::move(env)).Wait();
}

TEST(ConsoleMain, BadFlagsExitTwo) {
  TempDir dir;
  Outcome r = RunConsole(dir, {"--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
  r = RunConsole(dir, {"--replay", dir / "missing.db"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("missing.db"));
  r = RunConsole(dir, {"--duration", "5"});  // needs --headless
  EXPECT_EQ(r.code, 2);
  r = RunConsole(dir, {"--headless", "--duration", "-1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, StartsWith("--duration: Value -1 must be > 0\n"));
  r = RunConsole(dir, {"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--replay"));
}

TEST(ConsoleMain, ReplayListHeadlessAndRenderView) {
  TempDir dir;
  const std::string db = dir / "runs.db";
  WriteSyntheticRun(db);
  Outcome r = RunConsole(dir, {"--replay", db, "--list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("RUN "));
  EXPECT_THAT(r.out, HasSubstr("run-test"));
  EXPECT_THAT(r.out, HasSubstr("tiny-moe"));

  r = RunConsole(dir, {"--replay", db, "--headless"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("replay run run-test: "));
  EXPECT_THAT(r.out, HasSubstr("300 steps, 60 requests, 1200 spans, 0 gaps, 30.0s"));

  r = RunConsole(dir, {"--replay", db, "--render-view", "kernels", "--size", "100x30"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines;
  std::stringstream ss(r.out);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 30u);
  for (const auto& l : lines) EXPECT_EQ(DisplayWidth(l), 100) << l;
  EXPECT_THAT(lines[0], HasSubstr("REPLAY 30.0s/30.0s x1 PAUSED"));
  EXPECT_THAT(lines[2], StartsWith("Step 299 (newest of 64 kept)"));
  EXPECT_THAT(r.out, HasSubstr("moe_ffn"));
  EXPECT_THAT(r.out, HasSubstr("compute  50.0%      2    100us    100us    100us    100us"));
  EXPECT_THAT(lines[29], HasSubstr("replay " + db));

  r = RunConsole(dir, {"--replay", db, "--render-view", "overview", "--at", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("REPLAY 5.0s/30.0s x1 PAUSED"));
  EXPECT_THAT(r.out, HasSubstr("prefill     1.0k/s"));

  r = RunConsole(dir, {"--replay", db, "--render-view", "help"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Left/Right seek -10s / +10s"));

  // A run recorded without a placement (an engine before EPLB): one slot per
  // expert, balancedness computed from the counts (dev0 3 of 10 tokens in
  // L0, dev1 7: 5/7), all through the store and the replay.
  r = RunConsole(dir, {"--replay", db, "--render-view", "experts", "--size", "100x30"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Experts, last 64 steps: balancedness 0.71 (worst L0 0.71)"));
  EXPECT_THAT(r.out, HasSubstr("Slots of L0 (least balanced; [ ] pick layer): one slot per "
                               "expert (engine sent no placement)"));
  EXPECT_THAT(r.out, HasSubstr("dev1   2  3  │   448  70.0%"));

  r = RunConsole(dir, {"--replay", db, "--render-view", "nope"});
  EXPECT_EQ(r.code, 2);
  r = RunConsole(dir, {"--replay", db, "--render-view", "log", "--size", "wide"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--size wants WIDTHxHEIGHT"));
  r = RunConsole(dir, {"--replay", db, "--run", "nope", "--headless"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));
}

TEST(ConsoleMain, HeadlessRecordsAndCreatesFolders) {
  TempDir dir;
  const std::string ep = "ipc://" + (dir / "pub");
  telemetry::PublisherOptions po;
  po.endpoint = ep;
  po.heartbeat_ms = 50;
  po.meta_ms = 100;
  auto pub = telemetry::Publisher::Start(po, "headless-run", std::chrono::steady_clock::now());
  ASSERT_THAT(pub, IsOk());
  telemetry::Meta meta;
  meta.model.preset = "tiny-moe";
  (*pub)->SetMeta(meta);
  const std::string db = dir / "a/b/runs.db";
  Outcome r = RunConsole(dir, {"--headless", "--duration", "1", "--connect", ep, "--control",
                               "ipc://" + (dir / "ctl"), "--db", db});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("moe-console: received "));
  EXPECT_THAT(r.out, HasSubstr("dropped 0, db " + db));
  auto reader = store::Reader::Open(db);
  ASSERT_THAT(reader, IsOk());
  auto run = (*reader)->GetRun("headless-run");
  ASSERT_THAT(run, IsOk());
}

TEST(ConsoleMain, DefaultDbUnderXdgDataHome) {
  TempDir dir;
  Outcome r = RunConsole(dir,
                         {"--headless", "--duration", "0.2", "--connect", "ipc://" + (dir / "pub"),
                          "--control", "ipc://" + (dir / "ctl")},
                         {"XDG_DATA_HOME=" + dir.path().string() + "/xdg"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "xdg/switchyard/runs.db"));
}

// $SWITCHYARD_DB comes first, as for moe-store and scripts/run: an operator
// who sets it records and reads one file with every program.
TEST(ConsoleMain, DefaultDbIsSwitchyardDbFirst) {
  TempDir dir;
  const std::string db = dir / "mine/runs.db";
  Outcome r = RunConsole(dir,
                         {"--headless", "--duration", "0.2", "--connect", "ipc://" + (dir / "pub"),
                          "--control", "ipc://" + (dir / "ctl")},
                         {"SWITCHYARD_DB=" + db, "XDG_DATA_HOME=" + dir.path().string() + "/xdg"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(", db " + db));
  EXPECT_TRUE(std::filesystem::exists(db));
  EXPECT_FALSE(std::filesystem::exists(dir / "xdg/switchyard/runs.db"));
}

TEST(ConsoleMain, UnwritableDbIsAClearMessage) {
  TempDir dir;
  Outcome r = RunConsole(dir, {"--headless", "--duration", "0.2", "--db", "/proc/nope/runs.db"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot create folder /proc/nope"));
}

TEST(ConsoleMain, HeadlessExitsOnStopEventOnEngineLossAndOnSigterm) {
  TempDir dir;
  const std::string ep = "ipc://" + (dir / "pub");
  telemetry::PublisherOptions po;
  po.endpoint = ep;
  po.heartbeat_ms = 50;
  auto pub = telemetry::Publisher::Start(po, "stop-run", std::chrono::steady_clock::now());
  ASSERT_THAT(pub, IsOk());
  {
    Process p(dir, {"--headless", "--exit-on-stop", "--connect", ep, "--control",
                    "ipc://" + (dir / "ctl"), "--db", dir / "runs.db"});
    // Keep announcing the stop until the late-joining subscriber has seen it.
    std::atomic<bool> done{false};
    std::thread stopper([&] {
      while (!done) {
        telemetry::Event e;
        e.kind = "lifecycle";
        e.name = "stop";
        (*pub)->Publish(e);
        std::this_thread::sleep_for(50ms);
      }
    });
    Outcome r = p.Wait();
    done = true;
    stopper.join();
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith("moe-console: received "));
  }
  {
    // An engine that dies without its stop event: --exit-on-stop still exits
    // once heartbeats have been missing for 5 intervals (the run is abnormal).
    const std::string lost_ep = "ipc://" + (dir / "lost");
    po.endpoint = lost_ep;
    auto lost = telemetry::Publisher::Start(po, "lost-run", std::chrono::steady_clock::now());
    ASSERT_THAT(lost, IsOk());
    Process p(dir, {"--headless", "--exit-on-stop", "--connect", lost_ep, "--control",
                    "ipc://" + (dir / "ctl"), "--db", dir / "lost.db"});
    std::this_thread::sleep_for(500ms);  // heartbeats reach it: the run is live
    lost->reset();
    Outcome r = p.Wait();
    EXPECT_EQ(r.code, 0) << r.err;
    auto reader = store::Reader::Open(dir / "lost.db");
    ASSERT_THAT(reader, IsOk());
    auto run = (*reader)->GetRun("lost-run");
    ASSERT_THAT(run, IsOk());
    EXPECT_EQ(run->status, "abnormal");
  }
  {
    Process p(dir, {"--headless", "--connect", ep, "--control", "ipc://" + (dir / "ctl"), "--db",
                    dir / "runs.db"});
    std::this_thread::sleep_for(300ms);
    p.Signal(SIGTERM);
    Outcome r = p.Wait();
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith("moe-console: received "));
  }
}

TEST(ConsoleMain, CompareTwoWindowsPrintsThePanel) {
  TempDir dir;
  const std::string db = dir / "runs.db";
  WriteSyntheticRun(db);
  Outcome r = RunConsole(dir, {"--replay", db, "--compare", "run-test@0-10s", "@10s-20s"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("A run-test 0.0s-10.0s"));
  EXPECT_THAT(r.out, HasSubstr("B run-test 10.0s-20.0s"));
  EXPECT_THAT(r.out, HasSubstr("B vs A: decode tok/s +0%"));
  EXPECT_THAT(r.out, HasSubstr("moe_ffn                50.0%       50.0%"));
  r = RunConsole(dir, {"--replay", db, "--compare", "run-test@1m-2m", "run-test"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("outside run 'run-test'"));
  r = RunConsole(dir, {"--replay", db, "--compare", "run-test"});  // needs two
  EXPECT_EQ(r.code, 2);
  r = RunConsole(dir, {"--replay", db, "--replay-browse", "--headless"});
  EXPECT_EQ(r.code, 2);  // the browser is interactive only
}

}  // namespace
}  // namespace sy::console
