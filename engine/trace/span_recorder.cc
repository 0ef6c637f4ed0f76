#include "engine/trace/span_recorder.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace sy::engine {

std::string_view TraceLevelName(TraceLevel level) {
  switch (level) {
    case TraceLevel::kOff:
      return "off";
    case TraceLevel::kSummary:
      return "summary";
    case TraceLevel::kFull:
      return "full";
  }
  return "off";
}

Result<TraceLevel> ParseTraceLevel(std::string_view name) {
  if (name == "off") return TraceLevel::kOff;
  if (name == "summary") return TraceLevel::kSummary;
  if (name == "full") return TraceLevel::kFull;
  return InvalidArgument("unknown trace level '" + std::string(name.substr(0, 32)) +
                         "'; expected off, summary or full");
}

void SpanRecorder::Add(std::string_view name, std::string_view kind, int layer,
                       Clock::time_point start, Clock::time_point end, int64_t tokens,
                       int64_t flops, int64_t bytes) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  telemetry::Span s;
  s.device = device_;
  s.layer = layer;
  s.name = std::string(name);
  s.kind = std::string(kind);
  s.start_us = duration_cast<microseconds>(start - epoch_).count();
  s.dur_us = std::max<int64_t>(0, duration_cast<microseconds>(end - start).count());
  s.tokens = tokens;
  s.flops = flops;
  s.bytes = bytes;
  spans_.push_back(std::move(s));
}

std::vector<telemetry::KernelStat> Summarize(const std::vector<telemetry::Span>& spans) {
  std::map<std::tuple<int, std::string>, telemetry::KernelStat> by_key;
  for (const auto& s : spans) {
    auto& k = by_key[{s.device, s.name}];
    k.device = s.device;
    k.name = s.name;
    k.kind = s.kind;
    k.count += 1;
    k.total_us += s.dur_us;
    k.max_us = std::max(k.max_us, s.dur_us);
    k.flops += s.flops;
    k.bytes += s.bytes;
  }
  std::vector<telemetry::KernelStat> out;
  out.reserve(by_key.size());
  for (auto& [key, k] : by_key) out.push_back(std::move(k));
  return out;
}

}  // namespace sy::engine
