// File: console/app/replay_player.h
//
// ReplayPlayer: plays a stored run into a Collector on a play clock, so
// replay reuses every panel of the live console. Messages are read from
// store::Reader::Messages in bounded time windows as the clock advances.
//
//   ASSIGN_OR_RETURN(auto player, ReplayPlayer::Open(path, "", &collector));
//   player->Advance(0.1);                    // 100 ms of wall time at the current speed
//   player->Apply(ReplayAction::kSeekBack);  // -10 s: collector reset and re-fed
//
// Seeking backwards resets the Collector and re-feeds the last
// `refeed_seconds` before the new position (enough for every panel's window)
// plus the run's Meta, so a seek costs a bounded amount of reading.
//
// Thread-safety: one thread; the Collector it feeds is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "console/app/controller.h"
#include "console/collect/collector.h"
#include "store/store.h"

namespace sy::console {

inline constexpr double kMinSpeed = 0.25;
inline constexpr double kMaxSpeed = 16;

class ReplayPlayer {
 public:
  // `run_id` "" picks the newest run. NOT_FOUND if the file or run does not
  // exist or the file holds no runs; the Reader's errors otherwise.
  // REQUIRES: collector outlives the player.
  static Result<std::unique_ptr<ReplayPlayer>> Open(const std::string& path,
                                                    const std::string& run_id,
                                                    Collector* collector);

  const store::RunInfo& run() const { return run_; }
  ReplayClock clock() const;

  // Moves the clock by wall_s * speed when playing and feeds what it passed.
  // Stops playing at the end.
  Status Advance(double wall_s);
  Status Apply(ReplayAction action);
  // Clamped to [first stored message, duration]. The clock starts at the
  // first stored message (a console that joined late recorded nothing before).
  Status SeekTo(double position_s);
  // Feeds everything up to the end as fast as possible (headless, tests).
  Status PlayToEnd();

  void set_playing(bool playing) { playing_ = playing; }

 private:
  ReplayPlayer(std::unique_ptr<store::Reader> reader, store::RunInfo run, std::string path,
               Collector* collector);
  // Feeds messages with fed_us_ <= t <= to_us in windows.
  Status FeedTo(int64_t to_us);
  void Publish();

  std::unique_ptr<store::Reader> reader_;
  store::RunInfo run_;
  std::string path_;
  Collector* collector_;
  int64_t start_us_ = 0;  // time of the run's first stored message
  int64_t position_us_ = 0;
  int64_t fed_us_ = 0;  // messages with t < fed_us_ have been fed
  double speed_ = 1;
  bool playing_ = true;
};

}  // namespace sy::console
