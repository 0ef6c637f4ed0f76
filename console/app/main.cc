// moe-console: live view, recorder and replayer for moe-engine runs.
//
//   moe-console [--connect EP] [--control EP] [--db PATH]          live UI, recording
//   moe-console --headless [--duration S] [--exit-on-stop]          record only
//   moe-console --replay FILE [--run ID] [--list] [--headless]      replay
//   moe-console --replay FILE --render-view kernels --size 100x30   print one frame
//
// Exit codes: 0 ok, 1 runtime error (message on stderr), 2 bad flags.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "console/app/controller.h"
#include "console/app/live_session.h"
#include "console/app/replay_player.h"
#include "console/collect/collector.h"
#include "console/draw/views.h"
#include "console/term/terminal.h"
#include "store/paths.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string connect = "tcp://127.0.0.1:5555";
  std::string control = "tcp://127.0.0.1:5556";
  std::string db;
  bool no_record = false;
  bool headless = false;
  double duration_s = 0;
  bool exit_on_stop = false;
  std::string replay;
  std::string run;
  bool list = false;
  std::string render_view;
  std::string size = "80x24";
  std::optional<double> at_s;
};

// Waits for SIGINT/SIGTERM on its own thread (they are blocked everywhere
// else), so the UI loop can leave normally and restore the terminal.
class SignalWatcher {
 public:
  explicit SignalWatcher(const sigset_t& set) : set_(set) {
    thread_ = std::thread([this] {
      const timespec tick{0, 100'000'000};
      while (!done_) {
        if (sigtimedwait(&set_, nullptr, &tick) > 0) signalled_ = true;
      }
    });
  }
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }
  bool signalled() const { return signalled_; }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::atomic<bool> signalled_{false};
  std::thread thread_;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "moe-console: %s\n", s.ToString().c_str());
  return 1;
}

std::string FormatTime(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

int ListRuns(const std::string& path) {
  auto reader = store::Reader::Open(path);
  if (!reader.ok()) return Fail(reader.status().WithContext(path));
  auto runs = (*reader)->ListRuns();
  if (!runs.ok()) return Fail(runs.status().WithContext(path));
  std::printf("%-24s %-19s %9s %-10s %-16s %4s %8s %8s %9s\n", "RUN", "STARTED", "SECONDS",
              "STATUS", "MODEL", "DEVS", "STEPS", "REQS", "SPANS");
  for (const auto& r : *runs) {
    std::printf("%-24s %-19s %9.1f %-10s %-16s %4d %8lld %8lld %9lld\n", r.id.c_str(),
                FormatTime(r.started_unix_ms).c_str(), r.duration_us / 1e6, r.status.c_str(),
                r.model.c_str(), r.devices, static_cast<long long>(r.steps),
                static_cast<long long>(r.requests), static_cast<long long>(r.spans));
  }
  return 0;
}

// The interactive loop shared by live and replay: ~10 frames a second, keys
// handled as they come, every frame drawn whole from a fresh Snapshot.
template <typename OnEffects, typename OnTick>
int RunUi(Collector& collector, Controller& ctl, const SignalWatcher& signals, OnEffects on_effects,
          OnTick on_tick) {
  auto term = Terminal::Open();
  if (!term.ok()) return Fail(term.status());
  auto last_frame = Clock::now() - 1s;
  bool dirty = true;
  while (!signals.signalled()) {
    const auto now = Clock::now();
    if (now - last_frame >= 100ms || dirty) {
      const double dt = std::chrono::duration<double>(now - last_frame).count();
      on_tick(std::min(dt, 1.0), ctl);
      last_frame = now;
      const auto t0 = Clock::now();
      Snapshot s = collector.TakeSnapshot();
      const auto t1 = Clock::now();
      ViewState& v = ctl.mutable_view();
      v.log_scroll =
          std::min<int>(v.log_scroll, std::max<int>(0, static_cast<int>(s.log.size()) - 1));
      v.expert_layer = std::min<int>(v.expert_layer, static_cast<int>(s.phy2log.size()) - 1);
      v.experts_scroll =
          std::min(v.experts_scroll, ExpertsMaxScroll(s, v, (*term)->width(), (*term)->height()));
      Grid frame = DrawFrame(s, v, (*term)->width(), (*term)->height());
      const auto t2 = Clock::now();
      (*term)->Draw(frame);
      v.collect_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      v.draw_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
      dirty = false;
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(100ms - (Clock::now() - last_frame));
    std::optional<Key> key = (*term)->ReadKey(std::max(wait, 1ms));
    if (!key) continue;
    Effects fx = ctl.HandleKey(*key);
    if (fx.quit) break;
    on_effects(fx, ctl);
    dirty = dirty || fx.redraw || key->name == "Resize";
  }
  return 0;
}

int RunReplay(const Options& o, const SignalWatcher& signals) {
  Collector collector;
  auto player = ReplayPlayer::Open(o.replay, o.run, &collector);
  if (!player.ok()) return Fail(player.status());
  ReplayPlayer& p = **player;

  if (!o.render_view.empty()) {
    int w = 0, h = 0;
    char x = 0;
    if (std::sscanf(o.size.c_str(), "%d%c%d", &w, &x, &h) != 3 || x != 'x' || w <= 0 || h <= 0) {
      return Fail(InvalidArgument("--size wants WIDTHxHEIGHT, e.g. 100x30; got '" + o.size + "'"));
    }
    p.set_playing(false);
    const Status st = o.at_s ? p.SeekTo(*o.at_s) : p.PlayToEnd();
    if (!st.ok()) return Fail(st);
    ViewState v;
    v.replay = true;
    v.help = o.render_view == "help";  // the help overlay over the overview
    v.view = v.help ? View::kOverview : *ParseView(o.render_view);
    std::printf("%s\n", DrawFrame(collector.TakeSnapshot(), v, w, h).ToString().c_str());
    return 0;
  }

  if (o.headless) {
    const Status st = p.PlayToEnd();
    if (!st.ok()) return Fail(st);
    const Snapshot s = collector.TakeSnapshot();
    std::printf(
        "replay run %s: %lld messages, %lld steps, %lld requests, %lld spans, %lld gaps, "
        "%.1fs\n",
        p.run().id.c_str(), static_cast<long long>(s.received),
        static_cast<long long>(s.steps_seen), static_cast<long long>(s.requests_seen),
        static_cast<long long>(s.spans_seen), static_cast<long long>(s.gaps),
        p.run().duration_us / 1e6);
    return 0;
  }

  Controller ctl(/*replay_mode=*/true);
  Status last_error;
  return RunUi(
      collector, ctl, signals,
      [&](const Effects& fx, Controller& c) {
        if (!fx.replay) return;
        const Status st = p.Apply(*fx.replay);
        if (!st.ok()) c.SetMessage(st.ToString(), true);
      },
      [&](double dt, Controller& c) {
        const Status st = p.Advance(dt);
        if (!st.ok() && st.message() != last_error.message()) c.SetMessage(st.ToString(), true);
        last_error = st;
      });
}

int RunLive(const Options& o, const SignalWatcher& signals) {
  LiveOptions lo;
  lo.connect = o.connect;
  lo.control = o.control;
  if (!o.no_record) {
    std::string db = o.db;
    if (db.empty()) {
      auto def = store::DefaultDbPath();
      if (!def.ok()) return Fail(def.status());
      db = *def;
    }
    if (Status st = store::EnsureParentDir(db); !st.ok()) return Fail(st);
    lo.db_path = db;
  }
  auto live = LiveSession::Start(lo);
  if (!live.ok()) return Fail(live.status());
  LiveSession& session = **live;

  if (o.headless) {
    const auto start = Clock::now();
    while (!signals.signalled()) {
      if (o.duration_s > 0 &&
          std::chrono::duration<double>(Clock::now() - start).count() >= o.duration_s) {
        break;
      }
      if (o.exit_on_stop && session.stop_seen()) break;
      std::this_thread::sleep_for(50ms);
    }
    const LiveSummary s = session.Finish();
    std::printf(
        "moe-console: received %lld messages (gaps %lld, malformed %lld), written %lld, "
        "dropped %lld%s%s\n",
        static_cast<long long>(s.received), static_cast<long long>(s.gaps),
        static_cast<long long>(s.malformed), static_cast<long long>(s.written),
        static_cast<long long>(s.dropped), lo.db_path.empty() ? "" : ", db ", lo.db_path.c_str());
    if (!s.store_error.empty()) {
      std::fprintf(stderr, "moe-console: store error: %s\n", s.store_error.c_str());
      return 1;
    }
    return 0;
  }

  Controller ctl(/*replay_mode=*/false);
  return RunUi(
      session.collector(), ctl, signals,
      [&](const Effects& fx, Controller&) {
        if (fx.send) session.SendCommand(*fx.send);
      },
      [&](double, Controller& c) {
        for (auto& [text, error] : session.TakeCommandMessages()) c.SetMessage(text, error);
        for (auto& q : session.TakeQuestions()) c.Ask(std::move(q.text), std::move(q.command));
      });
}

int Main(int argc, char** argv) {
  // Block the stop signals before any thread exists so every thread inherits
  // the mask and only SignalWatcher receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Options o;
  CLI::App app{"moe-console: live view, recorder and replayer for moe-engine runs"};
  app.option_defaults()->always_capture_default();
  app.add_option("--connect", o.connect, "engine telemetry (PUB) endpoint");
  app.add_option("--control", o.control, "engine control (ROUTER) endpoint");
  auto* db = app.add_option("--db", o.db,
                            "store file (default $XDG_DATA_HOME/switchyard/runs.db or "
                            "~/.local/share/switchyard/runs.db)");
  app.add_flag("--no-record", o.no_record, "live: do not write a store")->excludes(db);
  auto* headless = app.add_flag("--headless", o.headless,
                                "no UI: record (live) or play through and summarise (replay)");
  auto* duration = app.add_option("--duration", o.duration_s, "headless live: stop after SECONDS")
                       ->check(CLI::PositiveNumber)
                       ->needs(headless);
  auto* exit_on_stop =
      app.add_flag("--exit-on-stop", o.exit_on_stop,
                   "headless live: exit when the engine publishes its lifecycle stop event")
          ->needs(headless);
  auto* replay = app.add_option("--replay", o.replay, "replay a store FILE")
                     ->check(CLI::ExistingFile)
                     ->excludes(duration, exit_on_stop);
  app.add_option("--run", o.run, "replay: run id (default newest)")->needs(replay);
  app.add_flag("--list", o.list, "replay: list the file's runs and exit")->needs(replay);
  auto* render =
      app.add_option("--render-view", o.render_view, "replay: print one frame of VIEW and exit")
          ->check(CLI::IsMember(
              {"overview", "kernels", "memory", "experts", "log", "requests", "help"}))
          ->needs(replay);
  app.add_option("--size", o.size, "with --render-view: WIDTHxHEIGHT")->needs(render);
  app.add_option("--at", o.at_s, "with --render-view: position in SECONDS (default end)")
      ->check(CLI::NonNegativeNumber)
      ->needs(render);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  SignalWatcher signals(stop_signals);
  if (!o.replay.empty()) {
    if (o.list) return ListRuns(o.replay);
    return RunReplay(o, signals);
  }
  return RunLive(o, signals);
}

}  // namespace
}  // namespace sy::console

int main(int argc, char** argv) { return sy::console::Main(argc, argv); }
