// File: telemetry/publisher.h
//
// Publisher: the engine's side of the streams (ZeroMQ PUB). Publish() never
// blocks and never fails: it stamps the envelope (run id, per-topic sequence
// number, time) and enqueues; a background thread serialises and sends. When
// the bounded queue is full the message is dropped and counted, so a slow or
// stopped observer can never slow the engine. Drops at the socket's
// high-water mark are invisible to the sender; consumers see both kinds as
// gaps in `seq`.
//
// The sender thread also emits, on its own clock, a heartbeat every
// `heartbeat_ms` (with drop counts) and re-sends the latest Meta every
// `meta_ms`, so late joiners learn the run (ZeroMQ guide: snapshot for late
// joiners, heartbeats for liveness).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "telemetry/curve.h"
#include "telemetry/protocol.h"

namespace sy::telemetry {

struct PublisherOptions {
  std::string endpoint = "tcp://127.0.0.1:5555";
  size_t queue_capacity = 65536;  // messages; beyond it Publish() drops
  int sndhwm = 100000;            // ZeroMQ send high-water mark, messages
  int heartbeat_ms = 500;
  int meta_ms = 1000;
  // CURVE with a ZAP allow-list (telemetry/curve.h). Required to bind beyond
  // loopback; any key in the allow-list (observer or operator) may subscribe.
  std::optional<CurveServer> curve = std::nullopt;
  // Test seam, empty in production: the sender thread calls it before it
  // takes each batch off the queue. A test blocks in it to overflow the queue
  // deterministically (tests/telemetry/publisher_test.cc).
  std::function<void()> before_batch;
  // The time envelopes are stamped with, in µs since the run's epoch; empty:
  // the steady clock minus `epoch`. The simulated backend passes its virtual
  // clock so every message of a sim run is on simulated time. Called from any
  // thread (the sender stamps heartbeats): must be thread-safe.
  std::function<int64_t()> now_us;
};

struct PublisherCounters {
  int64_t sent_total = 0;
  int64_t dropped_total = 0;
  std::map<std::string, int64_t> dropped;  // per topic
};

class Publisher {
 public:
  // Binds the PUB socket and starts the sender thread. UNAVAILABLE (with the
  // ZeroMQ error text) if the endpoint cannot be bound; INVALID_ARGUMENT for
  // queue_capacity == 0 or a non-positive heartbeat_ms / meta_ms or a bad
  // key; FAILED_PRECONDITION for an endpoint beyond loopback without curve.
  static Result<std::unique_ptr<Publisher>> Start(const PublisherOptions& options,
                                                  std::string run_id,
                                                  std::chrono::steady_clock::time_point epoch);
  // Sends what is queued (bounded by ~200 ms; the rest counts as dropped) and
  // a final heartbeat, stops the thread, closes the socket (linger 200 ms).
  ~Publisher();

  void Publish(Message m);
  // Also publishes it now; the sender re-sends it every meta_ms.
  void SetMeta(const Meta& meta);
  // Reported in heartbeats: "running" | "paused" | "stopping"; and the last step.
  void SetState(std::string state, int64_t step);
  PublisherCounters counters() const;
  const std::string& run_id() const;
  // The bound endpoint with any wildcard resolved ("tcp://127.0.0.1:*" binds
  // an ephemeral port; this tells which).
  const std::string& endpoint() const;

  class Impl;

 private:
  explicit Publisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::telemetry
