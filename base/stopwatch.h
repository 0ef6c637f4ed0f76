// File: base/stopwatch.h
//
// Wall time of a phase in milliseconds, the unit every switch, reshard and
// rebalance figure is reported in. Steady clock: phases are short and must
// not jump with the system clock.
//
//   const SteadyClock::time_point t0 = SteadyClock::now();
//   ...
//   stats.pack_ms = MsSince(t0);
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>

namespace sy {

using SteadyClock = std::chrono::steady_clock;

inline double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

}  // namespace sy
