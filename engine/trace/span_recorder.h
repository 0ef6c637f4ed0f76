// File: engine/trace/span_recorder.h
//
// SpanRecorder: collects the kernel spans of one device during one step.
// Each device worker owns one; the model runner hands them back with the step
// output. At TraceLevel::kOff a Scope costs one branch (no clock read).
//
//   { SpanRecorder::Scope s(rec, "attention", layer, tokens, flops, bytes); ...compute... }
//
// Thread-safety: single-threaded (owned by one device worker).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "telemetry/protocol.h"

namespace sy::engine {

enum class TraceLevel { kOff = 0, kSummary = 1, kFull = 2 };
std::string_view TraceLevelName(TraceLevel level);
// INVALID_ARGUMENT listing the valid names.
Result<TraceLevel> ParseTraceLevel(std::string_view name);

class SpanRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  // `epoch` is the run's start: span times are microseconds since it.
  SpanRecorder(int device, Clock::time_point epoch) : device_(device), epoch_(epoch) {}

  void Reset(TraceLevel level) {
    level_ = level;
    spans_.clear();
  }
  bool enabled() const { return level_ != TraceLevel::kOff; }
  int device() const { return device_; }

  void Add(std::string_view name, std::string_view kind, int layer, Clock::time_point start,
           Clock::time_point end, int64_t tokens, int64_t flops, int64_t bytes);
  const std::vector<telemetry::Span>& spans() const { return spans_; }
  std::vector<telemetry::Span>& mutable_spans() { return spans_; }

  // RAII span: measures from construction to destruction. flops/bytes may be
  // set later through the setters when only known after the work.
  class Scope {
   public:
    Scope(SpanRecorder* rec, const char* name, int layer, int64_t tokens = 0, int64_t flops = 0,
          int64_t bytes = 0, const char* kind = "compute")
        : rec_(rec && rec->enabled() ? rec : nullptr),
          name_(name),
          kind_(kind),
          layer_(layer),
          tokens_(tokens),
          flops_(flops),
          bytes_(bytes) {
      if (rec_) start_ = Clock::now();
    }
    ~Scope() {
      if (rec_) rec_->Add(name_, kind_, layer_, start_, Clock::now(), tokens_, flops_, bytes_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    void set_bytes(int64_t b) { bytes_ = b; }
    void set_flops(int64_t f) { flops_ = f; }
    void set_tokens(int64_t t) { tokens_ = t; }

   private:
    SpanRecorder* rec_;
    const char* name_;
    const char* kind_;
    int layer_;
    int64_t tokens_, flops_, bytes_;
    Clock::time_point start_;
  };

 private:
  int device_;
  Clock::time_point epoch_;
  TraceLevel level_ = TraceLevel::kOff;
  std::vector<telemetry::Span> spans_;
};

// Per-(device, name) aggregates of `spans`, for TraceLevel::kSummary.
std::vector<telemetry::KernelStat> Summarize(const std::vector<telemetry::Span>& spans);

}  // namespace sy::engine
