#include "console/app/compare_loader.h"

#include <algorithm>

namespace sy::console {
namespace {

constexpr int64_t kChunkUs = 5'000'000;  // engine time per Messages() query
constexpr int kTopKernels = 8;

}  // namespace

Result<CompareSide> ParseCompareSide(std::string_view text) {
  CompareSide s;
  const size_t at = text.rfind('@');
  s.run = std::string(text.substr(0, at));
  if (at != std::string_view::npos) {
    auto r = ParseTimeRange(text.substr(at + 1));
    if (!r.ok()) return r.status().WithContext("compare '" + std::string(text) + "'");
    s.range = *r;
  }
  return s;
}

Result<WindowFigures> LoadWindow(store::Reader& reader, const store::RunInfo& run,
                                 TimeRange range) {
  const int64_t from = std::max<int64_t>(0, range.from_us);
  // Half-open like every window: a message at exactly the run's last time
  // (its final heartbeat) is left out, so rates divide by the time covered.
  const int64_t to = std::min(range.to_us, run.duration_us);
  if (to <= from) {
    return InvalidArgument("window " + FormatPosition(from) + "-" + FormatPosition(range.to_us) +
                           " is outside run '" + run.id + "' (" + FormatPosition(run.duration_us) +
                           " long)");
  }
  WindowAccumulator acc(
      run.id + " " + FormatPosition(from) + "-" + FormatPosition(std::min(to, run.duration_us)),
      from, to);
  auto meta = reader.MetaAt(run.id, from);
  if (!meta.ok()) return meta.status().WithContext("compare run " + run.id);
  if (*meta) acc.SetInitialLayout((*meta)->layout);
  for (int64_t t = from; t < to; t += kChunkUs) {
    // Compare reads steps, requests and kernel stats: never the spans.
    auto msgs = reader.MessagesWithoutSpans(run.id, t, std::min(to, t + kChunkUs));
    if (!msgs.ok()) return msgs.status().WithContext("compare run " + run.id);
    for (const auto& m : *msgs) acc.Consume(m);
  }
  return acc.Finish();
}

Result<Comparison> CompareRuns(const std::string& path, const CompareSide& a,
                               const CompareSide& b) {
  auto reader = store::Reader::Open(path);
  if (!reader.ok()) return reader.status().WithContext("compare " + path);
  auto run_of = [&](const std::string& id) -> Result<store::RunInfo> {
    if (!id.empty()) return (*reader)->GetRun(id);
    ASSIGN_OR_RETURN(std::vector<store::RunInfo> runs, (*reader)->ListRuns());
    if (runs.empty()) return NotFound("compare " + path + ": the file holds no runs");
    return runs.front();
  };
  ASSIGN_OR_RETURN(store::RunInfo ra, run_of(a.run));
  ASSIGN_OR_RETURN(store::RunInfo rb, run_of(b.run));
  ASSIGN_OR_RETURN(WindowFigures fa, LoadWindow(**reader, ra, a.range));
  ASSIGN_OR_RETURN(WindowFigures fb, LoadWindow(**reader, rb, b.range));
  return Compare(fa, fb, kTopKernels);
}

Result<Comparison> CompareInReplay(ReplayPlayer& player, const ParsedCommand& cmd) {
  const nlohmann::json& args = cmd.request.args;
  TimeRange a, b;
  if (args.contains("around_us")) {
    const int64_t w = args["around_us"].get<int64_t>();
    std::optional<store::EventMark> ev = player.current_event();
    if (!ev) {
      ASSIGN_OR_RETURN(
          ev, player.reader().NearestEvent(player.run().id, player.position_us() + 1, false));
    }
    if (!ev) {
      return FailedPrecondition("no event at or before " + FormatPosition(player.position_us()) +
                                " to compare around (n jumps to the next one)");
    }
    a = {std::max(player.start_us(), ev->t_us - w), ev->t_us};
    b = {ev->t_us, ev->t_us + w};
    if (a.to_us <= a.from_us) {
      return FailedPrecondition("the event at " + FormatPosition(ev->t_us) +
                                " is at the start of the run: nothing before it");
    }
  } else {
    a = {args["a"][0].get<int64_t>(), args["a"][1].get<int64_t>()};
    b = {args["b"][0].get<int64_t>(), args["b"][1].get<int64_t>()};
  }
  ASSIGN_OR_RETURN(WindowFigures fa, LoadWindow(player.reader(), player.run(), a));
  ASSIGN_OR_RETURN(WindowFigures fb, LoadWindow(player.reader(), player.run(), b));
  return Compare(fa, fb, kTopKernels);
}

}  // namespace sy::console
