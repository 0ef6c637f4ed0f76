// Requests panel: what the scheduler holds now and what it finished. From the
// latest `requests` snapshot, the running requests (prefill progress while
// their prompt is being computed, then generated / max_new_tokens) and the
// waiting ones, each with device, prefix-cache reuse, preemptions and age;
// below them the most recent finished requests with their latencies.
// Ages are engine time (latest envelope `t` minus arrival), so a replay shows
// the ages of the run, not of the playback.
#include <algorithm>
#include <string>

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

void LiveRow(Grid& g, int y, int bar_w, const RequestProgress& p, bool waiting, int64_t now_us) {
  int x = g.Put(0, y, PadLeft(std::to_string(p.id), kIdW));
  x = g.Put(x, y, PadLeft(Dev(p.device), kDevW), theme::kDimmed);
  x += 1;
  double f = 0;
  std::string state;
  Style fill = theme::kChart;
  if (waiting) {
    // A retracted request waits with what it had generated; show how far.
    f = p.max_new_tokens > 0 ? static_cast<double>(p.generated) / p.max_new_tokens : 0;
    state = p.generated > 0
                ? "queued " + std::to_string(p.generated) + "/" + std::to_string(p.max_new_tokens)
                : "queued";
    fill = theme::kDimmed;
  } else if (InPrefill(p)) {
    f = p.prompt_tokens > 0 ? static_cast<double>(p.computed) / p.prompt_tokens : 0;
    state = "prefill " + std::to_string(p.computed) + "/" + std::to_string(p.prompt_tokens);
    fill = theme::kLabel;
  } else {
    f = p.max_new_tokens > 0 ? static_cast<double>(p.generated) / p.max_new_tokens : 0;
    state = "gen " + std::to_string(p.generated) + "/" + std::to_string(p.max_new_tokens);
  }
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

Grid DrawRequests(const Snapshot& s, const ViewState& /*v*/, Rect r) {
  Grid g(r.w, r.h);
  if (r.h <= 0) return g;
  const telemetry::Requests& q = s.requests;
  std::string title = "Requests";
  if (s.have_requests) {
    title += ": " + std::to_string(q.running_total) + " running, " +
             std::to_string(q.waiting_total) + " waiting  (step " + std::to_string(q.step) + ")";
  }
  if (s.retractions > 0) title += "  retractions " + std::to_string(s.retractions);
  g.Put(0, 0, title, theme::kTitle);
  int y = 1;
  if (!s.have_requests) {
    g.Put(0, y++, "No requests snapshot yet (the engine sends one every 200 ms).", theme::kDimmed);
  }

  // Section rows beyond the data: a title each, plus the live requests'
  // column header and the finished ones'.
  // A list that is cut (by the engine or here) wants a row for "… N more".
  auto wants = [](const std::vector<RequestProgress>& list, int total) {
    const int n = static_cast<int>(list.size());
    return std::max(1, n + (total > n ? 1 : 0));
  };
  const int want[3] = {s.have_requests ? wants(q.running, q.running_total) : 0,
                       s.have_requests ? wants(q.waiting, q.waiting_total) : 0,
                       std::max(1, static_cast<int>(s.finished.size()))};
  const int headers = (s.have_requests ? 3 : 0) + 2;
  int got[3];
  Share(r.h - y - headers, want, got);

  const int bar_w = std::clamp(r.w - kFixedW, 2, kMaxBarW);
  const int64_t now = s.latest_t_us;
  // One list; when it does not fit (or the engine capped it), the last row
  // says how many more there are.
  auto live = [&](const char* name, const std::vector<RequestProgress>& list, int total, int rows,
                  bool waiting) {
    g.Put(0, y++, std::string(name) + " " + std::to_string(total), theme::kTitle);
    if (list.empty()) {
      if (rows > 0) g.Put(2, y++, "none", theme::kDimmed);
      return;
    }
    const int n = static_cast<int>(list.size());
    const bool cut = n > rows || total > n;
    const int shown = cut ? std::max(0, std::min(n, rows - 1)) : n;
    for (int i = 0; i < shown; ++i) LiveRow(g, y++, bar_w, list[i], waiting, now);
    if (cut && rows > 0)
      g.Put(2, y++, "… " + std::to_string(total - shown) + " more", theme::kDimmed);
  };
  if (s.have_requests) {
    g.Put(0, y++,
          PadLeft("id", kIdW) + PadLeft("dev", kDevW) + " " + PadRight("progress", bar_w) + " " +
              PadRight("state", kStateW - 1) + PadLeft("cached", kCachedW) + PadLeft("pre", kPreW) +
              PadLeft("age", kAgeW),
          theme::kDimmed);
    live("running", q.running, q.running_total, got[0], false);
    live("waiting", q.waiting, q.waiting_total, got[1], true);
  }

  g.Put(0, y++, "finished " + std::to_string(s.finished.size()) + ", newest first", theme::kTitle);
  if (s.finished.empty()) {
    if (got[2] > 0) g.Put(2, y, "none yet", theme::kDimmed);
    return g;
  }
  g.Put(0, y++,
        PadLeft("id", kIdW) + PadLeft("dev", kDevW) + "  " + PadRight("finish", 10) +
            PadLeft("prompt", 7) + PadLeft("out", 6) + PadLeft("TTFT", 10) + PadLeft("e2e", 10) +
            PadLeft("cached", kCachedW) + PadLeft("pre", kPreW),
        theme::kDimmed);
  const int n = static_cast<int>(s.finished.size());
  for (int i = 0; i < std::min(n, got[2]); ++i) FinishedRow(g, y++, s.finished[n - 1 - i]);
  return g;
}

}  // namespace sy::console
