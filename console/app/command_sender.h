// File: console/app/command_sender.h
//
// CommandSender: sends operator commands to the engine's control socket on
// its own thread, so the UI never waits on the network. Each command gets a
// reply or a client-side error (UNAVAILABLE after `timeout`), handed to
// `on_done` on the sender thread.
//
//   auto sender = CommandSender::Start("tcp://127.0.0.1:5556", 3s, [&](const CommandOutcome& o)
//   {...}); sender->Send(parsed);  // returns at once
//
// Thread-safety: Send() from any thread; on_done runs on the sender thread and
// must be thread-safe with respect to what it touches.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "console/input/command_line.h"
#include "telemetry/control.h"
#include "telemetry/protocol.h"

namespace sy::console {

struct CommandOutcome {
  ParsedCommand command;
  std::string request_json;  // exactly what was sent
  int64_t sent_unix_ms = 0;
  Result<telemetry::CommandReply> reply = Internal("not sent");
};

class CommandSender {
 public:
  using OnDone = std::function<void(const CommandOutcome&)>;

  // INVALID_ARGUMENT if ZeroMQ rejects the endpoint (connecting is lazy, so
  // an absent engine shows up later as UNAVAILABLE replies).
  // `curve`: keys for an engine that requires CURVE (telemetry/curve.h).
  static Result<std::unique_ptr<CommandSender>> Start(
      const std::string& endpoint, std::chrono::milliseconds timeout, OnDone on_done,
      std::optional<telemetry::CurveClient> curve = std::nullopt);
  // Finishes the command in flight (bounded by the timeout), drops queued ones.
  ~CommandSender();

  void Send(ParsedCommand command);

 private:
  CommandSender(std::unique_ptr<telemetry::ControlClient> client, std::chrono::milliseconds timeout,
                OnDone on_done);
  void Run();

  std::unique_ptr<telemetry::ControlClient> client_;  // used only by thread_
  const std::chrono::milliseconds timeout_;
  const OnDone on_done_;
  int64_t next_id_ = 1;  // used only by thread_
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ParsedCommand> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace sy::console
