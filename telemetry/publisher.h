// File: telemetry/publisher.h
//
// Publisher: the engine's side of the streams (a ZeroMQ XPUB socket, which
// subscribers see as an ordinary PUB). Publish() never blocks and never
// fails: it stamps the envelope (run id, per-topic sequence number, time) and
// enqueues; a background thread serialises and sends without waiting. A
// message is dropped, and counted per topic in counters(), when
//   * the bounded queue is full (the sender thread fell behind), or
//   * the socket refuses it: with ZMQ_XPUB_NODROP a message that would take
//     any subscriber's queue past `sndhwm` is refused for every subscriber,
//     so a slow or stopped observer costs the others messages but never
//     slows the engine, and never loses one uncounted.
// A subscriber that stops reading altogether (SIGSTOP, a wedged process)
// would make every later message refused; ZMTP heartbeats bound that: a peer
// that answers no PING within `zmtp_heartbeat_timeout_ms` is disconnected
// (what was queued for it is discarded) and the others get messages again.
// A subscriber reconnects by itself; what it missed shows as gaps in `seq`,
// as every drop does (docs/PROTOCOL.md, "Gap accounting").
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
  // Messages ZeroMQ may hold per subscriber connection (>= 0; 0: no limit,
  // never refused). Beyond it messages are refused for all subscribers and
  // counted as dropped. Small, because the subscriber's own receive queue
  // (SubscriberOptions::rcvhwm) is what absorbs bursts while its process
  // runs; this one fills only when that process reads nothing at all, and
  // then it should fill, and count drops, well before the heartbeat cut-off
  // below (about 1 s of full tracing on a CPU engine).
  int sndhwm = 1000;
  // ZMTP (protocol-level) heartbeats on each subscriber connection, sent by
  // libzmq's I/O thread: a PING every zmtp_heartbeat_ivl_ms, and a peer that
  // sends nothing back within zmtp_heartbeat_timeout_ms of one is cut off.
  // A stopped process cannot answer, so this bounds how long it makes the
  // socket refuse messages for everyone: about ivl + timeout after it
  // stopped. The timeout is long enough that, under full tracing, the
  // kernel buffers and the `sndhwm` queue of a stopped subscriber fill well
  // before the cut (2 to 6 s on a loaded 2-core machine), so the engine
  // counts the loss; messages discarded with a cut-off connection are not
  // counted here (they are gaps to the subscriber). Too short, and an
  // overloaded but live subscriber is cut off too (it reconnects, with a
  // gap). 0 (ivl): off, as with a plain PUB socket. Both are independent of
  // `heartbeat_ms`, the engine's own heartbeat messages that observers use
  // to judge liveness.
  int zmtp_heartbeat_ivl_ms = 1000;
  int zmtp_heartbeat_timeout_ms = 8000;
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
  // Binds the XPUB socket and starts the sender thread. UNAVAILABLE (with
  // the ZeroMQ error text) if the endpoint cannot be bound; INVALID_ARGUMENT
  // for queue_capacity == 0, a non-positive heartbeat_ms / meta_ms, a
  // negative sndhwm / zmtp_heartbeat_ivl_ms, a non-positive
  // zmtp_heartbeat_timeout_ms with heartbeats on, or a bad key;
  // FAILED_PRECONDITION for an endpoint beyond loopback without curve.
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
