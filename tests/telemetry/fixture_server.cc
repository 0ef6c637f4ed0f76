// File: tests/telemetry/fixture_server.cc
//
// telemetry_fixture_server: a stand-in engine for checking third-party
// clients (tests/python/switchyard_client.py) against docs/PROTOCOL.md
// without running a model. It publishes one well-formed message of every
// topic every --period-ms through a real Publisher and answers commands
// through a real ControlServer: describe, status, pause, resume, trace and
// stop behave as documented (with events), anything else is NOT_FOUND.
//
// Prints "telemetry <endpoint>" and "control <endpoint>" (wildcard ports
// resolved) on stdout once both sockets are bound, then runs for --seconds
// (0: until killed or a "stop" command).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>
#include <string>

#include "telemetry/control.h"
#include "telemetry/publisher.h"
#include "tests/telemetry/samples.h"

namespace sy::telemetry {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  std::string telemetry = "tcp://127.0.0.1:*";
  std::string control = "tcp://127.0.0.1:*";
  double seconds = 0;
  int period_ms = 50;
  std::string trace_level = "full";
};

class Fixture {
 public:
  Fixture(Publisher& pub, Clock::time_point epoch, std::string trace_level)
      : pub_(pub), epoch_(epoch) {
    meta_ = testing::SampleMeta();
    meta_.trace_level = std::move(trace_level);
    pub_.SetMeta(meta_);
  }

  bool stopping() const { return state_ == "stopping"; }

  void PublishRound() {
    if (state_ == "running") ++step_;
    for (Message m : testing::SampleMessages()) {
      if (std::holds_alternative<Meta>(m) || std::holds_alternative<Heartbeat>(m)) continue;
      if (std::holds_alternative<Spans>(m) && meta_.trace_level != "full") continue;
      if (std::holds_alternative<KernelStats>(m) && meta_.trace_level == "off") continue;
      std::visit(
          [&](auto& x) {
            if constexpr (requires { x.step; }) x.step = step_;
          },
          m);
      if (auto* s = std::get_if<Step>(&m)) s->generated_total = step_ * 3;
      pub_.Publish(std::move(m));
    }
    pub_.SetState(state_, step_);
  }

  CommandReply Handle(const CommandRequest& r) {
    Emit(r, "received", {{"id", r.id}, {"args", r.args}});
    CommandReply reply = Run(r);
    json detail = {{"id", r.id}, {"args", r.args}};
    if (reply.ok) {
      detail["result"] = reply.result;
    } else {
      detail["error"] = {{"code", reply.error_code}, {"message", reply.error_message}};
    }
    Emit(r, reply.ok ? "done" : "failed", detail);
    return reply;
  }

 private:
  CommandReply Run(const CommandRequest& r) {
    if (r.cmd == "describe") {
      json j = ToJson(meta_);
      for (const char* k : {"v", "run", "seq", "t"}) j.erase(k);
      return OkReply(r.id, j);
    }
    if (r.cmd == "status") {
      const PublisherCounters c = pub_.counters();
      return OkReply(
          r.id,
          {{"state", state_},
           {"step", step_},
           {"running", 4},
           {"waiting", 1},
           {"finished", step_ / 4},
           {"generated", step_ * 3},
           {"trace_level", meta_.trace_level},
           {"dropped_total", c.dropped_total},
           {"uptime_us",
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - epoch_).count()}});
    }
    if (r.cmd == "pause" || r.cmd == "resume") {
      state_ = r.cmd == "pause" ? "paused" : "running";
      meta_.paused = state_ == "paused";
      pub_.SetMeta(meta_);
      return OkReply(r.id, {{"state", state_}});
    }
    if (r.cmd == "trace") {
      const json& level = r.args.contains("level") ? r.args["level"] : json();
      if (!level.is_string() || (level != "off" && level != "summary" && level != "full")) {
        return ErrorReply(r.id, InvalidArgument("trace: args.level must be \"off\", \"summary\" "
                                                "or \"full\""));
      }
      json result = {{"level", level}, {"previous", meta_.trace_level}};
      meta_.trace_level = level.get<std::string>();
      pub_.SetMeta(meta_);
      return OkReply(r.id, result);
    }
    if (r.cmd == "stop") {
      state_ = "stopping";
      return OkReply(r.id, {{"state", state_}});
    }
    if (r.cmd == "cancel") {
      // The fixture's requests are the ids its Requests sample lists; each
      // can be cancelled once. Anything else is NOT_FOUND, as on the engine.
      const json& id = r.args.contains("id") ? r.args["id"] : json();
      if (!id.is_number_integer()) {
        return ErrorReply(r.id, InvalidArgument("cancel: args.id must be an integer"));
      }
      const int64_t want = id.get<int64_t>();
      if (want < 40 || want > 43 || !cancelled_.insert(want).second) {
        return ErrorReply(
            r.id, NotFound("cancel: no running or waiting request " + std::to_string(want)));
      }
      return OkReply(r.id, {{"id", want}, {"finish", "cancelled"}});
    }
    if (r.cmd == "flush_cache") return OkReply(r.id, {{"freed_pages", 12}});
    std::string known;
    for (std::string_view c : kCommands) known += (known.empty() ? "" : ", ") + std::string(c);
    return ErrorReply(r.id, NotFound("unknown command '" + r.cmd + "'; known: " + known));
  }

  void Emit(const CommandRequest& r, const std::string& phase, json detail) {
    Event e;
    e.kind = "command";
    e.name = r.cmd;
    e.phase = phase;
    e.message = r.cmd + " " + phase;
    e.detail = std::move(detail);
    pub_.Publish(std::move(e));
  }

  Publisher& pub_;
  const Clock::time_point epoch_;
  Meta meta_;
  std::string state_ = "running";
  int64_t step_ = 0;
  std::set<int64_t> cancelled_;
};

int Main(int argc, char** argv) {
  Options o;
  CLI::App app("Switchyard protocol fixture: publishes every topic, answers commands");
  app.add_option("--telemetry", o.telemetry, "PUB endpoint to bind");
  app.add_option("--control", o.control, "ROUTER endpoint to bind");
  app.add_option("--seconds", o.seconds, "run time, 0 = until killed or stopped");
  app.add_option("--period-ms", o.period_ms, "time between rounds of messages")
      ->check(CLI::Range(1, 60000));
  app.add_option("--trace-level", o.trace_level, "initial trace level")
      ->check(CLI::IsMember({"off", "summary", "full"}));
  CLI11_PARSE(app, argc, argv);

  const auto epoch = Clock::now();
  PublisherOptions po;
  po.endpoint = o.telemetry;
  po.heartbeat_ms = 200;
  po.meta_ms = 500;
  auto pub = Publisher::Start(po, "fixture-" + std::to_string(::getpid()), epoch);
  if (!pub.ok()) {
    std::cerr << "fixture: " << pub.status().ToString() << "\n";
    return 1;
  }
  auto server = ControlServer::Bind(o.control);
  if (!server.ok()) {
    std::cerr << "fixture: " << server.status().ToString() << "\n";
    return 1;
  }
  std::cout << "telemetry " << (*pub)->endpoint() << "\ncontrol " << (*server)->endpoint()
            << std::endl;

  Fixture fixture(**pub, epoch, o.trace_level);
  const CommandHandler handler = [&](const CommandRequest& r) { return fixture.Handle(r); };
  const auto end =
      epoch + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  auto next_round = Clock::now();
  while (!fixture.stopping() && (o.seconds <= 0 || Clock::now() < end)) {
    if (Clock::now() >= next_round) {
      fixture.PublishRound();
      next_round += std::chrono::milliseconds(o.period_ms);
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_round - Clock::now());
    (*server)->ServeFor(handler, std::max(wait, std::chrono::milliseconds(0)));
  }
  return 0;
}

}  // namespace
}  // namespace sy::telemetry

int main(int argc, char** argv) { return sy::telemetry::Main(argc, argv); }
