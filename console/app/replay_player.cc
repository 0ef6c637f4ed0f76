#include "console/app/replay_player.h"

#include <algorithm>
#include <cmath>

#include "console/input/replay_commands.h"

namespace sy::console {
namespace {

constexpr int64_t kUsPerS = 1'000'000;
constexpr int64_t kWindowUs = 5 * kUsPerS;    // read at most this much engine time per query
constexpr int64_t kRefeedUs = 130 * kUsPerS;  // > the collector's 120 s series
constexpr int64_t kSeekStepUs = 10 * kUsPerS;
// A rebuild reads spans only for this last part of its window: spans are
// most of a full trace, and only the newest steps' are shown (the Kernels
// view keeps CollectorOptions::span_steps_kept steps: 64, i.e. 10 s covers
// them at 6.4 steps a second or more).
constexpr int64_t kSpanTailUs = 10 * kUsPerS;

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

Status ReplayPlayer::FeedTo(int64_t to_us, bool with_spans) {
  // Messages exactly at the position are included: query up to to_us + 1.
  const int64_t end = to_us + 1;
  while (fed_us_ < end) {
    const int64_t until = std::min(end, fed_us_ + kWindowUs);
    auto msgs = with_spans ? reader_->Messages(run_.id, fed_us_, until)
                           : reader_->MessagesWithoutSpans(run_.id, fed_us_, until);
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
  if (target < fed_us_ - 1 || target - fed_us_ > kRefeedUs) {
    // Backwards, or far ahead: rebuild the collector from a bounded window
    // before target instead of reading everything in between.
    collector_->Reset();
    const int64_t from = std::max<int64_t>(start_us_, target - kRefeedUs);
    if (from > start_us_) {
      // The Meta in force at `from` (the layout before a later switch).
      auto meta = reader_->MetaAt(run_.id, from);
      if (!meta.ok()) return meta.status().WithContext("replay " + path_ + " run " + run_.id);
      if (*meta) {
        telemetry::Meta m = **meta;
        m.env.t_us = from;  // so it does not stretch the series past `target`
        collector_->Consume(m);
      }
    }
    fed_us_ = from;
    const int64_t spans_from = std::max(from, target - kSpanTailUs);
    if (spans_from > from) RETURN_IF_ERROR(FeedTo(spans_from - 1, /*with_spans=*/false));
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
    case ReplayAction::kNextEvent:
    case ReplayAction::kPrevEvent: {
      const bool forward = action == ReplayAction::kNextEvent;
      auto ev = JumpToEvent(forward);
      if (!ev.ok()) return ev.status();
      notice_ = *ev ? DescribeEvent(**ev)
                    : std::string(forward ? "no event after " : "no event before ") +
                          FormatPosition(position_us_);
      return Status::Ok();
    }
  }
  Publish();
  return Status::Ok();
}

Status ReplayPlayer::SeekToStep(int64_t step) {
  auto t = reader_->StepTime(run_.id, step);
  if (!t.ok()) return t.status().WithContext("seek step " + std::to_string(step));
  return SeekTo(static_cast<double>(*t) / kUsPerS);
}

Result<std::optional<store::EventMark>> ReplayPlayer::JumpToEvent(bool forward) {
  // From the mark last reached when still there: marks sharing its time
  // (a command and the event it caused) are each visited.
  auto ev = reader_->NearestEvent(run_.id, position_us_, forward, event_ ? &*event_ : nullptr);
  if (!ev.ok()) return ev.status().WithContext("replay " + path_ + " run " + run_.id);
  if (!*ev) return ev;
  event_ = **ev;
  RETURN_IF_ERROR(SeekTo(static_cast<double>(event_->t_us) / kUsPerS));
  return ev;
}

std::string DescribeEvent(const store::EventMark& e) {
  std::string what;
  if (e.kind == "command") {
    what = "command :" + e.name + (e.ok ? " ok" : " failed");
  } else {
    what = e.kind;
    if (!e.name.empty() && e.name != e.kind) what += " " + e.name;
    if (!e.phase.empty()) what += " " + e.phase;
  }
  what += " @ " + FormatPosition(e.t_us);
  if (e.kind != "command" && !e.message.empty()) what += ": " + e.message;
  return what;
}

Status ReplayPlayer::PlayToEnd() {
  position_us_ = run_.duration_us;
  playing_ = false;
  Status st = FeedTo(position_us_);
  Publish();
  return st;
}

}  // namespace sy::console
