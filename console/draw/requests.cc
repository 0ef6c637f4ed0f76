// Requests panel: what the scheduler holds now and what it finished. From the
// latest `requests` snapshot, the running requests (prefill progress while
// their prompt is being computed, then generated / max_new_tokens) and the
// waiting ones, each with device, prefix-cache reuse, preemptions and age;
// below them the most recent finished requests with their latencies.
// Ages are engine time (latest envelope `t` minus arrival), so a replay shows
// the ages of the run, not of the playback.
//
// v.requests_sort orders each list (the title says which); v.requests_filter
// keeps the rows whose id, state ("gen 8/16", "queued", ...), finish reason
// or section name ("running", "waiting", "finished") contain it, ignoring
// case; each section then says how many of its rows match.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "console/draw/bar.h"
#include "console/draw/format.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

using telemetry::RequestDone;
using telemetry::RequestProgress;

// Columns of a live request: id (8) dev (4) bar (flexible) state (16)
// cached (8) pre (5) age (9).
constexpr int kIdW = 8;
constexpr int kDevW = 4;
constexpr int kStateW = 16;
constexpr int kCachedW = 8;
constexpr int kPreW = 5;
constexpr int kAgeW = 9;
constexpr int kFixedW = kIdW + kDevW + 1 + kStateW + kCachedW + kPreW + kAgeW;
constexpr int kMaxBarW = 40;

std::string Dev(int device) { return device >= 0 ? std::to_string(device) : "-"; }

// In prefill while its prompt (which, after a retraction, includes what it
// had generated) is not all folded into its KV / state yet.
bool InPrefill(const RequestProgress& p) { return p.computed < p.prompt_tokens; }

// The state column, and the bar's fill fraction.
std::string StateText(const RequestProgress& p, bool waiting) {
  if (waiting) {
    // A retracted request waits with what it had generated; show how far.
    return p.generated > 0
               ? "queued " + std::to_string(p.generated) + "/" + std::to_string(p.max_new_tokens)
               : "queued";
  }
  if (InPrefill(p)) {
    return "prefill " + std::to_string(p.computed) + "/" + std::to_string(p.prompt_tokens);
  }
  return "gen " + std::to_string(p.generated) + "/" + std::to_string(p.max_new_tokens);
}

double Progress(const RequestProgress& p, bool waiting) {
  if (!waiting && InPrefill(p)) {
    return p.prompt_tokens > 0 ? static_cast<double>(p.computed) / p.prompt_tokens : 0;
  }
  return p.max_new_tokens > 0 ? static_cast<double>(p.generated) / p.max_new_tokens : 0;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `needle` is already lower case; "" matches everything.
bool Matches(const std::string& needle, const std::string& section, int64_t id,
             const std::string& state) {
  if (needle.empty()) return true;
  return Lower(section + " " + std::to_string(id) + " " + state).find(needle) != std::string::npos;
}

// Time to first token and per output token of a live request so far; -1
// when not known yet.
int64_t LiveTtft(const RequestProgress& p) {
  return p.first_token_us >= 0 ? p.first_token_us - p.arrival_us : -1;
}
int64_t LiveTpot(const RequestProgress& p, int64_t now_us) {
  return p.first_token_us >= 0 && p.generated > 1 ? (now_us - p.first_token_us) / (p.generated - 1)
                                                  : -1;
}

// State order: prefill, then decoding, then queued.
int StateRank(const RequestProgress& p, bool waiting) { return waiting ? 2 : InPrefill(p) ? 0 : 1; }

// Sorts live rows; ties keep the engine's order (oldest first).
void SortLive(std::vector<RequestProgress>& v, RequestSort by, bool waiting, int64_t now_us) {
  auto key = [&](const RequestProgress& p) -> double {
    switch (by) {
      case RequestSort::kId:
        return static_cast<double>(p.id);
      case RequestSort::kState:
        return StateRank(p, waiting);
      case RequestSort::kProgress:
        return -Progress(p, waiting);
      case RequestSort::kTtft:
        return -static_cast<double>(LiveTtft(p));
      case RequestSort::kTpot:
        return -static_cast<double>(LiveTpot(p, now_us));
      case RequestSort::kAge:
        return static_cast<double>(p.arrival_us);  // oldest (largest age) first
    }
    return 0;
  };
  std::stable_sort(v.begin(), v.end(), [&](const RequestProgress& a, const RequestProgress& b) {
    return key(a) < key(b);
  });
}

// Finished rows: id newest (highest) first, the others largest first.
void SortFinished(std::vector<RequestDone>& v, RequestSort by) {
  auto key = [&](const RequestDone& d) -> double {
    switch (by) {
      case RequestSort::kId:
        return -static_cast<double>(d.id);
      case RequestSort::kState:
        return 0;  // by finish reason below
      case RequestSort::kProgress:
        return -static_cast<double>(d.output_tokens);
      case RequestSort::kTtft:
        return d.output_tokens > 0 ? -static_cast<double>(d.ttft_us) : 0;
      case RequestSort::kTpot:
        return -static_cast<double>(d.tpot_us);
      case RequestSort::kAge:
        return -static_cast<double>(d.e2e_us);
    }
    return 0;
  };
  std::stable_sort(v.begin(), v.end(), [&](const RequestDone& a, const RequestDone& b) {
    if (by == RequestSort::kState && a.finish != b.finish) return a.finish < b.finish;
    return key(a) < key(b);
  });
}

void LiveRow(Grid& g, int y, int bar_w, const RequestProgress& p, bool waiting, int64_t now_us) {
  int x = g.Put(0, y, PadLeft(std::to_string(p.id), kIdW));
  x = g.Put(x, y, PadLeft(Dev(p.device), kDevW), theme::kDimmed);
  x += 1;
  const double f = Progress(p, waiting);
  const std::string state = StateText(p, waiting);
  const Style fill = waiting ? theme::kDimmed : InPrefill(p) ? theme::kLabel : theme::kChart;
  DrawBar(g, x, y, bar_w, f, fill);
  x += bar_w;
  x = g.Put(x, y, " " + PadRight(state, kStateW - 1));
  x = g.Put(x, y, PadLeft(std::to_string(p.cached_tokens), kCachedW),
            p.cached_tokens > 0 ? theme::kGood : theme::kDimmed);
  x = g.Put(x, y, PadLeft(std::to_string(p.preemptions), kPreW),
            p.preemptions > 0 ? theme::kWarn : theme::kDimmed);
  g.Put(x, y, PadLeft(FormatUs(std::max<int64_t>(0, now_us - p.arrival_us)), kAgeW));
}

void FinishedRow(Grid& g, int y, const RequestDone& d) {
  int x = g.Put(0, y, PadLeft(std::to_string(d.id), kIdW));
  x = g.Put(x, y, PadLeft(Dev(d.device), kDevW), theme::kDimmed);
  x = g.Put(x, y, "  " + PadRight(d.finish, 10),
            d.finish == "cancelled" ? theme::kWarn : theme::kNormal);
  x = g.Put(x, y, PadLeft(std::to_string(d.prompt_tokens), 7));
  x = g.Put(x, y, PadLeft(std::to_string(d.output_tokens), 6));
  // A request cancelled before its first token has no TTFT.
  const bool answered = d.output_tokens > 0;
  x = g.Put(x, y, PadLeft(answered ? FormatUs(d.ttft_us) : "-", 10));
  x = g.Put(x, y, PadLeft(d.output_tokens > 1 ? FormatUs(d.tpot_us) : "-", 10));
  x = g.Put(x, y, PadLeft(FormatUs(d.e2e_us), 10));
  x = g.Put(x, y, PadLeft(std::to_string(d.cached_tokens), kCachedW),
            d.cached_tokens > 0 ? theme::kGood : theme::kDimmed);
  g.Put(x, y, PadLeft(std::to_string(d.preemptions), kPreW),
        d.preemptions > 0 ? theme::kWarn : theme::kDimmed);
}

// Rows for three sections wanting `want[i]` rows out of `avail`: half, a
// quarter and a quarter to start with, then what one leaves to the others
// in order.
void Share(int avail, const int want[3], int got[3]) {
  static constexpr int kParts[3] = {2, 1, 1};
  int left = std::max(0, avail);
  for (int i = 0; i < 3; ++i) {
    got[i] = std::min(want[i], std::max(0, avail) * kParts[i] / 4);
    left -= got[i];
  }
  for (int i = 0; i < 3; ++i) {
    const int more = std::min(want[i] - got[i], left);
    got[i] += more;
    left -= more;
  }
}

}  // namespace

Grid DrawRequests(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  if (r.h <= 0) return g;
  const telemetry::Requests& q = s.requests;
  const std::string needle = Lower(v.requests_filter);
  const bool filtering = !needle.empty();
  const int64_t now = s.latest_t_us;

  // Filtered and sorted copies of the three lists.
  auto live_rows = [&](const std::vector<RequestProgress>& in, bool waiting) {
    std::vector<RequestProgress> out;
    for (const RequestProgress& p : in) {
      if (Matches(needle, waiting ? "waiting" : "running", p.id, StateText(p, waiting))) {
        out.push_back(p);
      }
    }
    SortLive(out, v.requests_sort, waiting, now);
    return out;
  };
  const std::vector<RequestProgress> running = live_rows(q.running, false);
  const std::vector<RequestProgress> waiting = live_rows(q.waiting, true);
  std::vector<RequestDone> finished;
  for (const RequestDone& d : s.finished) {
    if (Matches(needle, "finished", d.id, d.finish)) finished.push_back(d);
  }
  // s.finished is oldest first; newest first is the order ties keep.
  std::reverse(finished.begin(), finished.end());
  SortFinished(finished, v.requests_sort);

  std::string title = "Requests";
  if (s.have_requests) {
    title += ": " + std::to_string(q.running_total) + " running, " +
             std::to_string(q.waiting_total) + " waiting  (step " + std::to_string(q.step) + ")";
  }
  if (s.retractions > 0) title += "  retractions " + std::to_string(s.retractions);
  title += "  sort " + std::string(RequestSortName(v.requests_sort));
  if (filtering) title += "  filter /" + v.requests_filter;
  g.Put(0, 0, title, theme::kTitle);
  int y = 1;
  if (!s.have_requests) {
    g.Put(0, y++, "No requests snapshot yet (the engine sends one every 200 ms).", theme::kDimmed);
  }

  // Section rows beyond the data: a title each, plus the live requests'
  // column header and the finished ones'.
  // A list that is cut (by the engine or here) wants a row for "… N more".
  // Filtered, only the rows the engine listed can match: no "more" row.
  auto wants = [&](const std::vector<RequestProgress>& list, int total) {
    const int n = static_cast<int>(list.size());
    return std::max(1, n + (!filtering && total > n ? 1 : 0));
  };
  const int want[3] = {s.have_requests ? wants(running, q.running_total) : 0,
                       s.have_requests ? wants(waiting, q.waiting_total) : 0,
                       std::max(1, static_cast<int>(finished.size()))};
  const int headers = (s.have_requests ? 3 : 0) + 2;
  int got[3];
  Share(r.h - y - headers, want, got);

  const int bar_w = std::clamp(r.w - kFixedW, 2, kMaxBarW);
  // "running 2" or, filtered, "running 2, 1 match".
  auto section = [&](const char* name, int total, size_t matching) {
    std::string t = std::string(name) + " " + std::to_string(total);
    if (filtering) t += ", " + std::to_string(matching) + " match";
    return t;
  };
  // One list; when it does not fit (or the engine capped it), the last row
  // says how many more there are.
  auto live = [&](const char* name, const std::vector<RequestProgress>& list, int total, int rows,
                  bool is_waiting) {
    g.Put(0, y++, section(name, total, list.size()), theme::kTitle);
    if (list.empty()) {
      if (rows > 0) g.Put(2, y++, "none", theme::kDimmed);
      return;
    }
    const int n = static_cast<int>(list.size());
    const int all = filtering ? n : total;
    const bool cut = n > rows || all > n;
    const int shown = cut ? std::max(0, std::min(n, rows - 1)) : n;
    for (int i = 0; i < shown; ++i) LiveRow(g, y++, bar_w, list[i], is_waiting, now);
    if (cut && rows > 0)
      g.Put(2, y++, "… " + std::to_string(all - shown) + " more", theme::kDimmed);
  };
  if (s.have_requests) {
    g.Put(0, y++,
          PadLeft("id", kIdW) + PadLeft("dev", kDevW) + " " + PadRight("progress", bar_w) + " " +
              PadRight("state", kStateW - 1) + PadLeft("cached", kCachedW) + PadLeft("pre", kPreW) +
              PadLeft("age", kAgeW),
          theme::kDimmed);
    live("running", running, q.running_total, got[0], false);
    live("waiting", waiting, q.waiting_total, got[1], true);
  }

  const std::string order = v.requests_sort == RequestSort::kId
                                ? "newest first"
                                : "by " + std::string(RequestSortName(v.requests_sort));
  g.Put(0, y++,
        section("finished", static_cast<int>(s.finished.size()), finished.size()) + ", " + order,
        theme::kTitle);
  if (finished.empty()) {
    if (got[2] > 0) g.Put(2, y, filtering ? "none match" : "none yet", theme::kDimmed);
    return g;
  }
  g.Put(0, y++,
        PadLeft("id", kIdW) + PadLeft("dev", kDevW) + "  " + PadRight("finish", 10) +
            PadLeft("prompt", 7) + PadLeft("out", 6) + PadLeft("TTFT", 10) + PadLeft("TPOT", 10) +
            PadLeft("e2e", 10) + PadLeft("cached", kCachedW) + PadLeft("pre", kPreW),
        theme::kDimmed);
  const int n = static_cast<int>(finished.size());
  for (int i = 0; i < std::min(n, got[2]); ++i) FinishedRow(g, y++, finished[i]);
  return g;
}

}  // namespace sy::console
