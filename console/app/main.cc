// moe-console: live view, recorder and replayer for moe-engine runs.
//
//   moe-console [--connect EP] [--control EP] [--db PATH]          live UI, recording
//   moe-console --connect TEL,CTL --connect TEL,CTL ...             several engines
//   moe-console --headless [--duration S] [--exit-on-stop]          record only
//   moe-console --replay FILE [--run ID] [--list] [--headless]      replay
//   moe-console --replay FILE --render-view kernels --size 100x30   print one frame
//   moe-console --replay-browse [--replay FILE | --db FILE]         pick a run, replay it
//   moe-console --compare RUN[@FROM-TO] RUN[@FROM-TO] [--db FILE]   print a comparison
//   moe-console --connect tcp://HOST:5555 --client-key me.key --server-public-key engine.pub
//
// Exit codes: 0 ok, 1 runtime error (message on stderr), 2 bad flags.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/flag_checks.h"
#include "console/app/compare_loader.h"
#include "console/app/controller.h"
#include "console/app/engine_set.h"
#include "console/app/live_session.h"
#include "console/app/replay_control.h"
#include "console/app/replay_player.h"
#include "console/app/run_browser.h"
#include "console/collect/collector.h"
#include "console/draw/browser.h"
#include "console/draw/compare.h"
#include "console/draw/engines.h"
#include "console/draw/views.h"
#include "console/term/terminal.h"
#include "store/paths.h"
#include "telemetry/curve.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> connect;  // TELEMETRY[,CONTROL], one per engine
  std::optional<std::string> control;
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
  bool browse = false;               // --replay-browse
  std::vector<std::string> compare;  // --compare A B
  std::string client_key;            // --client-key FILE (CURVE secret key)
  std::string server_public_key;     // --server-public-key FILE
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

// What a frame draws: one fresh Snapshot per engine (replay: one), and the
// engines' names for the engine strip (console/draw/engines.h).
struct FrameSource {
  std::function<std::vector<Snapshot>()> take;
  std::vector<std::string> names;
};

// The interactive loop shared by live and replay: ~10 frames a second, keys
// handled as they come, every frame drawn whole from fresh Snapshots.
template <typename OnEffects, typename OnTick>
int RunUi(const FrameSource& source, Controller& ctl, const SignalWatcher& signals,
          OnEffects on_effects, OnTick on_tick) {
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
      const std::vector<Snapshot> snaps = source.take();
      const auto t1 = Clock::now();
      ViewState& v = ctl.mutable_view();
      const Snapshot& s =
          v.engine >= 0 && v.engine < static_cast<int>(snaps.size()) ? snaps[v.engine] : snaps[0];
      v.log_scroll =
          std::min<int>(v.log_scroll, std::max<int>(0, static_cast<int>(s.log.size()) - 1));
      v.expert_layer = std::min<int>(v.expert_layer, static_cast<int>(s.phy2log.size()) - 1);
      ResolveKernelStep(s, v);  // a step picked with ',' stays put as steps arrive
      v.experts_scroll =
          std::min(v.experts_scroll, ExpertsMaxScroll(s, v, (*term)->width(), (*term)->height()));
      Grid frame = DrawEngineFrame(snaps, source.names, v, (*term)->width(), (*term)->height());
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
  const FrameSource source{[&] { return std::vector<Snapshot>{collector.TakeSnapshot()}; }, {""}};
  return RunUi(
      source, ctl, signals,
      [&](const Effects& fx, Controller& c) {
        if (fx.replay_command) ApplyReplayCommand(p, *fx.replay_command, c);
        if (fx.replay) ReportReplayAction(p, p.Apply(*fx.replay), c);
      },
      [&](double dt, Controller& c) {
        const Status st = p.Advance(dt);
        if (!st.ok() && st.message() != last_error.message()) c.SetMessage(st.ToString(), true);
        last_error = st;
      });
}

// The store file replay and compare read: --replay FILE, else --db, else the
// console's default.
Result<std::string> StorePath(const Options& o) {
  if (!o.replay.empty()) return o.replay;
  if (!o.db.empty()) return o.db;
  return store::DefaultDbPath();
}

// The run browser, then the chosen run's replay; quitting a replay comes
// back to the browser, quitting the browser ends.
int RunBrowse(Options o, const SignalWatcher& signals) {
  auto path = StorePath(o);
  if (!path.ok()) return Fail(path.status());
  auto state = LoadBrowser(*path);
  if (!state.ok()) return Fail(state.status());
  while (!signals.signalled()) {
    std::optional<std::string> chosen;
    {
      auto term = Terminal::Open();
      if (!term.ok()) return Fail(term.status());
      bool quit = false;
      while (!quit && !chosen && !signals.signalled()) {
        (*term)->Draw(DrawBrowser(*state, (*term)->width(), (*term)->height()));
        std::optional<Key> key = (*term)->ReadKey(100ms);
        if (!key) continue;
        BrowserOutcome out = HandleBrowserKey(*state, *key);
        quit = out.quit;
        chosen = std::move(out.open);
      }
      if (!chosen) return 0;
    }
    o.replay = *path;
    o.run = *chosen;
    if (const int rc = RunReplay(o, signals); rc != 0) return rc;
  }
  return 0;
}

// --compare A B: both windows from the store, printed as the compare panel.
int RunCompare(const Options& o) {
  auto path = StorePath(o);
  if (!path.ok()) return Fail(path.status());
  auto a = ParseCompareSide(o.compare[0]);
  auto b = ParseCompareSide(o.compare[1]);
  if (!a.ok()) return Fail(a.status());
  if (!b.ok()) return Fail(b.status());
  auto c = CompareRuns(*path, *a, *b);
  if (!c.ok()) return Fail(c.status());
  std::printf("%s\n", DrawCompare(*c, Rect{0, 0, 100, CompareHeight(*c)}).ToString().c_str());
  return 0;
}

int RunLive(const Options& o, const SignalWatcher& signals) {
  auto engines = ResolveEngines(o.connect, o.control);
  if (!engines.ok()) {
    std::fprintf(stderr, "moe-console: %s\n", engines.status().message().c_str());
    return 2;
  }
  EngineSetOptions eo;
  eo.engines = *engines;
  if (!o.no_record) {
    std::string db = o.db;
    if (db.empty()) {
      auto def = store::DefaultDbPath();
      if (!def.ok()) return Fail(def.status());
      db = *def;
    }
    if (Status st = store::EnsureParentDir(db); !st.ok()) return Fail(st);
    eo.db_path = db;
  }
  if (!o.client_key.empty()) {
    auto curve = telemetry::LoadCurveClient(o.client_key, o.server_public_key);
    if (!curve.ok()) return Fail(curve.status());
    eo.curve = std::move(curve).value();
  }
  auto live = EngineSet::Start(eo);
  if (!live.ok()) return Fail(live.status());
  EngineSet& set = **live;

  if (o.headless) {
    const auto start = Clock::now();
    while (!signals.signalled()) {
      if (o.duration_s > 0 &&
          std::chrono::duration<double>(Clock::now() - start).count() >= o.duration_s) {
        break;
      }
      // The stop event, or the engine lost: a recorder under a supervisor
      // must not wait forever for an event an overloaded wire dropped.
      if (o.exit_on_stop && (set.all_stopped() || set.all_over())) break;
      std::this_thread::sleep_for(50ms);
    }
    const LiveSummary s = set.Finish();
    std::printf(
        "moe-console: received %lld messages (gaps %lld, malformed %lld), written %lld, "
        "dropped %lld%s%s%s\n",
        static_cast<long long>(s.received), static_cast<long long>(s.gaps),
        static_cast<long long>(s.malformed), static_cast<long long>(s.written),
        static_cast<long long>(s.dropped), eo.db_path.empty() ? "" : ", db ", eo.db_path.c_str(),
        set.size() > 1 ? (", " + std::to_string(set.size()) + " engines").c_str() : "");
    if (!s.store_error.empty()) {
      std::fprintf(stderr, "moe-console: store error: %s\n", s.store_error.c_str());
      return 1;
    }
    return 0;
  }

  Controller ctl(/*replay_mode=*/false);
  ctl.mutable_view().engine_count = set.size();
  const FrameSource source{[&] { return set.TakeSnapshots(); }, set.names()};
  return RunUi(
      source, ctl, signals,
      [&](const Effects& fx, Controller&) {
        if (fx.send) set.Send(fx.engine, *fx.send);
      },
      [&](double, Controller& c) {
        for (auto& [text, error] : set.TakeCommandMessages()) c.SetMessage(text, error);
        for (auto& q : set.TakeQuestions()) {
          c.Ask(std::move(q.question.text), std::move(q.question.command),
                set.size() > 1 ? q.engine : -1);
        }
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
  app.add_option("--connect", o.connect,
                 "engine telemetry (PUB) endpoint, default tcp://127.0.0.1:5555; as "
                 "TELEMETRY,CONTROL also its control endpoint. Repeat for several engines "
                 "(each recorded as its own run of one session); there a tcp://HOST:PORT "
                 "without CONTROL implies PORT+1")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--control", o.control,
                 "engine control (ROUTER) endpoint, default tcp://127.0.0.1:5556 (one engine "
                 "only)");
  auto* client_key = app.add_option(
      "--client-key", o.client_key,
      "CURVE secret key FILE of this console (moe-engine keygen), for an engine bound beyond "
      "loopback; used for telemetry and commands");
  auto* server_key = app.add_option("--server-public-key", o.server_public_key,
                                    "the engine's CURVE public key FILE (its NAME.pub)");
  client_key->needs(server_key);
  server_key->needs(client_key);
  auto* db = app.add_option("--db", o.db,
                            "store file (default $SWITCHYARD_DB, else "
                            "$XDG_DATA_HOME/switchyard/runs.db or "
                            "~/.local/share/switchyard/runs.db)");
  app.add_flag("--no-record", o.no_record, "live: do not write a store")->excludes(db);
  auto* headless = app.add_flag("--headless", o.headless,
                                "no UI: record (live) or play through and summarise (replay)");
  auto* duration = app.add_option("--duration", o.duration_s, "headless live: stop after SECONDS")
                       ->check(Positive())
                       ->needs(headless);
  auto* exit_on_stop =
      app.add_flag("--exit-on-stop", o.exit_on_stop,
                   "headless live: exit when the engine publishes its lifecycle stop event, "
                   "or once it is lost (heartbeats stopped for 5 intervals)")
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
      ->check(NonNegative())
      ->needs(render);
  auto* browse = app.add_flag("--replay-browse", o.browse,
                              "pick a stored run to replay (from --replay FILE, --db or the "
                              "default store)")
                     ->excludes(headless, render);
  app.add_option("--compare", o.compare,
                 "print RUN[@FROM-TO] against RUN[@FROM-TO] (e.g. r1@0-30s r1@30s-; RUN may be "
                 "empty: the newest) from --replay FILE, --db or the default store")
      ->expected(2)
      ->excludes(browse, headless, render);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  SignalWatcher signals(stop_signals);
  if (!o.compare.empty()) return RunCompare(o);
  if (o.browse) return RunBrowse(o, signals);
  if (!o.replay.empty()) {
    if (o.list) return ListRuns(o.replay);
    return RunReplay(o, signals);
  }
  return RunLive(o, signals);
}

}  // namespace
}  // namespace sy::console

int main(int argc, char** argv) { return sy::console::Main(argc, argv); }
