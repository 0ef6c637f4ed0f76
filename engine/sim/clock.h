// File: engine/sim/clock.h
//
// ServingClock: the time the serving loop, the telemetry envelopes and every
// latency figure are measured on. Under `--backend cpu` it is the wall clock
// (WallClock); under `--backend sim` it is a VirtualClock that only the
// simulated kernels move forward, so a run of ten simulated minutes can take
// seconds (speed 0) or be paced at a multiple of real time for live watching.
// Everything above the runner reads NowUs() and nothing else, which is what
// keeps the two backends' telemetry identical in form.
//
//   auto clock = std::make_shared<VirtualClock>(/*speed=*/0);
//   clock->Advance(1250);                     // a simulated step of 1.25 ms
//   int wait_ms = clock->IdleWaitMs(next_arrival_us, 5);  // jumps to the arrival
//
// Thread-safety: NowUs() from any thread (the telemetry sender stamps
// heartbeats with it); Advance and IdleWaitMs from the serving thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sy::engine {

class ServingClock {
 public:
  virtual ~ServingClock() = default;
  // Microseconds since the run's epoch (never decreases).
  virtual int64_t NowUs() const = 0;
  // The loop has nothing to run before `until_us` (-1: nothing is scheduled,
  // e.g. an engine waiting for commands or HTTP requests). Returns how long,
  // in real milliseconds within [0, max_ms], to wait on the control socket.
  // A wall clock only computes the wait; a virtual clock also moves itself:
  // unpaced it jumps straight to until_us and returns 0, paced it moves by
  // the wait times its speed.
  virtual int IdleWaitMs(int64_t until_us, int max_ms) = 0;
  // True for a VirtualClock (run metadata: "clock": "virtual").
  virtual bool is_virtual() const = 0;
};

class WallClock final : public ServingClock {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WallClock(Clock::time_point epoch) : epoch_(epoch) {}
  int64_t NowUs() const override;
  int IdleWaitMs(int64_t until_us, int max_ms) override;
  bool is_virtual() const override { return false; }

 private:
  const Clock::time_point epoch_;
};

class VirtualClock final : public ServingClock {
 public:
  // speed 0: as fast as possible. speed s > 0: simulated time runs at s
  // times real time (Advance sleeps until it would not run ahead).
  // REQUIRES: speed >= 0 and finite.
  explicit VirtualClock(double speed);
  int64_t NowUs() const override { return now_us_.load(std::memory_order_relaxed); }
  int IdleWaitMs(int64_t until_us, int max_ms) override;
  bool is_virtual() const override { return true; }

  // Simulated work of `us` microseconds (>= 0) has happened: a step, a
  // switch's pause, a committed expert layer. Paced, returns once real time
  // has caught up with speed.
  void Advance(int64_t us);
  double speed() const { return speed_; }

 private:
  void Pace();

  const double speed_;
  std::atomic<int64_t> now_us_{0};
  const std::chrono::steady_clock::time_point real_start_ = std::chrono::steady_clock::now();
};

}  // namespace sy::engine
