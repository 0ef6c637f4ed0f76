// File: console/app/replay_player.h
//
// ReplayPlayer: plays a stored run into a Collector on a play clock, so
// replay reuses every panel of the live console. Messages are read from
// store::Reader::Messages in bounded time windows as the clock advances.
//
//   ASSIGN_OR_RETURN(auto player, ReplayPlayer::Open(path, "", &collector));
//   player->Advance(0.1);                    // 100 ms of wall time at the current speed
//   player->Apply(ReplayAction::kSeekBack);  // -10 s: collector reset and re-fed
//   player->Apply(ReplayAction::kNextEvent); // to the next switch, rebalance, command...
//   std::string said = player->TakeNotice(); // "switch done @ 1m05.0s: EP -> TP"
//
// Seeking backwards, or forwards further than the refeed window, resets the
// Collector and re-feeds the last 130 s before the new position (enough for
// every panel's window; spans only for its last 10 s, enough for the Kernels
// view's step history) plus the Meta in force, so a seek costs a bounded
// amount of reading whatever the run's length.
//
// Thread-safety: one thread; the Collector it feeds is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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
  // To the run's first stored step numbered >= step (store::Reader::StepTime).
  Status SeekToStep(int64_t step);
  // To the nearest event or command after (forward) / before the position
  // (store::Reader::NearestEvent), which becomes current_event(). Returns it,
  // or nullopt (position unchanged) when there is none that way.
  Result<std::optional<store::EventMark>> JumpToEvent(bool forward);
  // Feeds everything up to the end as fast as possible (headless, tests).
  Status PlayToEnd();

  // The event the last JumpToEvent reached (what `:compare event` is around).
  const std::optional<store::EventMark>& current_event() const { return event_; }
  // What the last action has to say on the message line ("" if nothing);
  // cleared by the call.
  std::string TakeNotice() { return std::exchange(notice_, std::string()); }
  // Engine time of the run's first stored message (where the clock starts).
  int64_t start_us() const { return start_us_; }
  int64_t position_us() const { return position_us_; }
  // The open store, for queries beside playback (compare windows).
  store::Reader& reader() { return *reader_; }

  void set_playing(bool playing) { playing_ = playing; }

 private:
  ReplayPlayer(std::unique_ptr<store::Reader> reader, store::RunInfo run, std::string path,
               Collector* collector);
  // Feeds messages with fed_us_ <= t <= to_us in windows; without Spans
  // messages unless `with_spans`.
  Status FeedTo(int64_t to_us, bool with_spans = true);
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
  std::optional<store::EventMark> event_;
  std::string notice_;
};

// One line naming an event for the message line:
// "switch switch done @ 1m05.0s: EP -> TP" becomes "switch done @ 1m05.0s: ...",
// a command "command :switch tp ok @ 12.0s".
std::string DescribeEvent(const store::EventMark& e);

}  // namespace sy::console
