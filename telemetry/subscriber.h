// File: telemetry/subscriber.h
//
// Subscriber: an observer's side of the streams (ZeroMQ SUB, all topics).
// Decodes each message and tracks, per (run, topic), the sequence numbers it
// has seen, so messages lost anywhere between the engine's Publish() and this
// socket are counted as gaps.
//
// Thread-safety: one thread at a time (a ZeroMQ socket is not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "telemetry/curve.h"
#include "telemetry/protocol.h"

namespace sy::telemetry {

struct SubscriberOptions {
  std::string endpoint = "tcp://127.0.0.1:5555";
  int rcvhwm = 100000;
  // CURVE keys for an engine that requires them. A key the engine does not
  // admit gets no messages at all (Receive times out), never an error.
  std::optional<CurveClient> curve = std::nullopt;
};

struct SubscriberCounters {
  int64_t received = 0;   // well-formed messages
  int64_t malformed = 0;  // undecodable messages (skipped)
  int64_t gaps = 0;       // messages missing according to seq
  std::map<std::string, int64_t> gaps_by_topic;
  std::string last_error;  // text of the last malformed message's error
};

class Subscriber {
 public:
  // Connects (ZeroMQ connects lazily, so an absent engine is not an error).
  // INVALID_ARGUMENT for an endpoint ZeroMQ rejects or a bad key.
  static Result<std::unique_ptr<Subscriber>> Connect(const SubscriberOptions& options);
  ~Subscriber();

  // Waits up to `timeout` for one message. Returns nullopt on timeout. A
  // malformed message is counted and returned as INVALID_ARGUMENT; the caller
  // keeps receiving.
  Result<std::optional<Message>> Receive(std::chrono::milliseconds timeout);
  const SubscriberCounters& counters() const;

  class Impl;

 private:
  explicit Subscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::telemetry
