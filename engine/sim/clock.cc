// File: engine/sim/clock.cc
#include "engine/sim/clock.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace sy::engine {

int64_t WallClock::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - epoch_).count();
}

int WallClock::IdleWaitMs(int64_t until_us, int max_ms) {
  if (until_us < 0) return max_ms;
  const int64_t wait_us = until_us - NowUs();
  if (wait_us <= 0) return 0;
  // Round up: waking a little late admits the arrival on this turn instead
  // of spinning through a zero-length wait just before it.
  return static_cast<int>(std::min<int64_t>(max_ms, (wait_us + 999) / 1000));
}

VirtualClock::VirtualClock(double speed) : speed_(std::isfinite(speed) && speed > 0 ? speed : 0) {}

void VirtualClock::Advance(int64_t us) {
  if (us <= 0) return;
  now_us_.fetch_add(us, std::memory_order_relaxed);
  Pace();
}

void VirtualClock::Pace() {
  if (speed_ <= 0) return;
  // Real time the simulated time so far is due at: sleep off any lead so a
  // paced run never runs ahead of speed x real time (it may fall behind when
  // the host is slower than that; nothing is skipped to catch up).
  const auto due = real_start_ + std::chrono::microseconds(
                                     static_cast<int64_t>(static_cast<double>(NowUs()) / speed_));
  std::this_thread::sleep_until(due);
}

int VirtualClock::IdleWaitMs(int64_t until_us, int max_ms) {
  const int64_t now = NowUs();
  if (speed_ <= 0) {
    // Nothing scheduled: let simulated time pass with real time, so an idle
    // sim engine waiting for commands is not frozen at one instant.
    if (until_us < 0) {
      now_us_.fetch_add(static_cast<int64_t>(max_ms) * 1000, std::memory_order_relaxed);
      return max_ms;
    }
    if (until_us > now) now_us_.store(until_us, std::memory_order_relaxed);
    return 0;
  }
  const int64_t max_sim_us = static_cast<int64_t>(static_cast<double>(max_ms) * 1000 * speed_);
  const int64_t step_us =
      until_us < 0 ? max_sim_us : std::clamp<int64_t>(until_us - now, 0, max_sim_us);
  now_us_.fetch_add(step_us, std::memory_order_relaxed);
  // The caller waits on its socket for the real time this simulated time is
  // worth; Pace() afterwards would double it, so compute instead of sleep.
  const auto due = real_start_ + std::chrono::microseconds(
                                     static_cast<int64_t>(static_cast<double>(NowUs()) / speed_));
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(due - std::chrono::steady_clock::now())
          .count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, max_ms));
}

}  // namespace sy::engine
