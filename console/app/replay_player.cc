#include "console/app/replay_player.h"

#include <algorithm>
#include <cmath>

namespace sy::console {
namespace {

constexpr int64_t kUsPerS = 1'000'000;
constexpr int64_t kWindowUs = 5 * kUsPerS;    // read at most this much engine time per query
constexpr int64_t kRefeedUs = 130 * kUsPerS;  // > the collector's 120 s series
constexpr int64_t kSeekStepUs = 10 * kUsPerS;

}  // namespace

Result<std::unique_ptr<ReplayPlayer>> ReplayPlayer::Open(const std::string& path,
                                                         const std::string& run_id,
                                                         Collector* collector) {
  auto reader = store::Reader::Open(path);
  if (!reader.ok()) return reader.status().WithContext("replay " + path);
  store::RunInfo run;
  if (run_id.empty()) {
    auto runs = (*reader)->ListRuns();
    if (!runs.ok()) return runs.status().WithContext("replay " + path);
    if (runs->empty()) return NotFound("replay " + path + ": the file holds no runs");
    run = runs->front();
  } else {
    auto got = (*reader)->GetRun(run_id);
    if (!got.ok()) return got.status().WithContext("replay " + path);
    run = *got;
  }
  auto p = std::unique_ptr<ReplayPlayer>(
      new ReplayPlayer(std::move(reader).value(), std::move(run), path, collector));
  collector->Reset();
  collector->SetStoreCounters(StoreCounters{0, 0, "", path});
  // A console that joined late recorded nothing before its first message:
  // start the clock there instead of playing dead time from t = 0.
  for (int64_t from = 0; from <= p->run_.duration_us; from += kWindowUs) {
    auto first = p->reader_->Messages(p->run_.id, from, from + kWindowUs);
    if (!first.ok()) return first.status().WithContext("replay " + path);
    if (!first->empty()) {
      p->start_us_ = telemetry::EnvelopeOf(first->front()).t_us;
      break;
    }
  }
  p->position_us_ = p->start_us_;
  p->fed_us_ = p->start_us_;
  RETURN_IF_ERROR(p->FeedTo(p->position_us_));
  p->Publish();
  return p;
}

ReplayPlayer::ReplayPlayer(std::unique_ptr<store::Reader> reader, store::RunInfo run,
                           std::string path, Collector* collector)
    : reader_(std::move(reader)),
      run_(std::move(run)),
      path_(std::move(path)),
      collector_(collector) {}

ReplayClock ReplayPlayer::clock() const {
  return ReplayClock{static_cast<double>(position_us_) / kUsPerS,
                     static_cast<double>(run_.duration_us) / kUsPerS, speed_, playing_};
}

void ReplayPlayer::Publish() { collector_->SetReplayClock(clock()); }

Status ReplayPlayer::FeedTo(int64_t to_us) {
  // Messages exactly at the position are included: query up to to_us + 1.
  const int64_t end = to_us + 1;
  while (fed_us_ < end) {
    const int64_t until = std::min(end, fed_us_ + kWindowUs);
    auto msgs = reader_->Messages(run_.id, fed_us_, until);
    if (!msgs.ok()) return msgs.status().WithContext("replay " + path_ + " run " + run_.id);
    for (const auto& m : *msgs) collector_->Consume(m);
    fed_us_ = until;
  }
  return Status::Ok();
}

Status ReplayPlayer::Advance(double wall_s) {
  if (playing_ && wall_s > 0) {
    const auto step = static_cast<int64_t>(std::llround(wall_s * speed_ * kUsPerS));
    position_us_ = std::min(run_.duration_us, position_us_ + step);
    if (position_us_ >= run_.duration_us) playing_ = false;
  }
  Status st = FeedTo(position_us_);
  Publish();
  return st;
}

Status ReplayPlayer::SeekTo(double position_s) {
  const int64_t target =
      std::clamp<int64_t>(static_cast<int64_t>(std::llround(position_s * kUsPerS)), start_us_,
                          std::max(start_us_, run_.duration_us));
  if (target < fed_us_ - 1) {
    // Backwards: rebuild the collector from a bounded window before target.
    collector_->Reset();
    const int64_t from = std::max<int64_t>(start_us_, target - kRefeedUs);
    if (from > start_us_) {
      auto meta = reader_->GetMeta(run_.id);
      if (meta.ok()) {
        telemetry::Meta m = *meta;
        m.env.t_us = from;  // so it does not stretch the series past `target`
        collector_->Consume(m);
      }
    }
    fed_us_ = from;
  }
  position_us_ = target;
  Status st = FeedTo(position_us_);
  Publish();
  return st;
}

Status ReplayPlayer::Apply(ReplayAction action) {
  const double pos = static_cast<double>(position_us_) / kUsPerS;
  switch (action) {
    case ReplayAction::kPlayPause:
      if (!playing_ && position_us_ >= run_.duration_us) {
        // At the end, play means play again from the start.
        Status st = SeekTo(static_cast<double>(start_us_) / kUsPerS);
        playing_ = true;
        Publish();
        return st;
      }
      playing_ = !playing_;
      break;
    case ReplayAction::kFaster:
      speed_ = std::min(kMaxSpeed, speed_ * 2);
      break;
    case ReplayAction::kSlower:
      speed_ = std::max(kMinSpeed, speed_ / 2);
      break;
    case ReplayAction::kSeekBack:
      return SeekTo(pos - kSeekStepUs / double(kUsPerS));
    case ReplayAction::kSeekForward:
      return SeekTo(pos + kSeekStepUs / double(kUsPerS));
    case ReplayAction::kSeekStart:
      return SeekTo(0);
    case ReplayAction::kSeekEnd:
      return SeekTo(static_cast<double>(run_.duration_us) / kUsPerS);
  }
  Publish();
  return Status::Ok();
}

Status ReplayPlayer::PlayToEnd() {
  position_us_ = run_.duration_us;
  playing_ = false;
  Status st = FeedTo(position_us_);
  Publish();
  return st;
}

}  // namespace sy::console
