#include "console/input/replay_commands.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace sy::console {
namespace {

Status BadTime(std::string_view text, std::string_view why) {
  return InvalidArgument("bad time '" + std::string(text) + "': " + std::string(why) +
                         " (e.g. 90s, 1m30s, 500ms, 1.5)");
}

}  // namespace

Result<int64_t> ParseTimeUs(std::string_view text) {
  if (text.empty()) return BadTime(text, "empty");
  struct Unit {
    std::string_view name;
    double us;
  };
  // Decreasing; "ms" before "m" so the longer name wins.
  constexpr Unit kUnits[] = {{"h", 3600e6}, {"ms", 1e3}, {"m", 60e6}, {"s", 1e6}};
  constexpr int kRank[] = {0, 3, 1, 2};  // order of appearance allowed: h, m, s, ms
  double total = 0;
  int last_rank = -1;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && ((text[j] >= '0' && text[j] <= '9') || text[j] == '.')) ++j;
    if (j == i) return BadTime(text, "expected a number");
    const std::string num(text.substr(i, j - i));
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || !std::isfinite(v)) {
      return BadTime(text, "bad number '" + num + "'");
    }
    if (j == text.size()) {
      if (last_rank >= 0) return BadTime(text, "missing unit after '" + num + "'");
      total = v * 1e6;  // bare seconds
      i = j;
      break;
    }
    int u = -1;
    for (int k = 0; k < 4; ++k) {
      if (text.substr(j, kUnits[k].name.size()) == kUnits[k].name) {
        u = k;
        break;
      }
    }
    if (u < 0) return BadTime(text, "unknown unit at '" + std::string(text.substr(j)) + "'");
    if (kRank[u] <= last_rank) return BadTime(text, "units must go h, m, s, ms");
    last_rank = kRank[u];
    total += v * kUnits[u].us;
    i = j + kUnits[u].name.size();
  }
  if (total > 9e18) return BadTime(text, "too large");
  return static_cast<int64_t>(std::llround(total));
}

Result<TimeRange> ParseTimeRange(std::string_view text) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    return InvalidArgument("bad range '" + std::string(text) + "': expected FROM-TO, e.g. 0-30s");
  }
  TimeRange r;
  const std::string_view from = text.substr(0, dash), to = text.substr(dash + 1);
  if (!from.empty()) {
    auto f = ParseTimeUs(from);
    if (!f.ok()) return f.status().WithContext("range '" + std::string(text) + "'");
    r.from_us = *f;
  }
  if (!to.empty()) {
    auto t = ParseTimeUs(to);
    if (!t.ok()) return t.status().WithContext("range '" + std::string(text) + "'");
    r.to_us = *t;
  }
  if (r.to_us <= r.from_us) {
    return InvalidArgument("bad range '" + std::string(text) + "': it ends before it starts");
  }
  return r;
}

Status ParseSeek(const std::vector<std::string>& words, ParsedCommand& out) {
  constexpr std::string_view kUsage = "seek TIME | seek +T | seek -T | seek step N";
  if (words.size() < 2) return InvalidArgument("seek needs a target: " + std::string(kUsage));
  if (words[1] == "step") {
    if (words.size() != 3) return InvalidArgument("seek step needs one step number: seek step N");
    const std::string& n = words[2];
    const bool digits =
        !n.empty() && n.size() <= 18 && n.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) return InvalidArgument("bad step '" + n + "': expected a number");
    out.request.args["step"] = std::stoll(n);
    out.text = "seek step " + n;
    return Status::Ok();
  }
  if (words.size() > 2) {
    return InvalidArgument("seek takes one target (got '" + words[2] +
                           "'): " + std::string(kUsage));
  }
  std::string_view t = words[1];
  const bool rel = t.front() == '+' || t.front() == '-';
  const bool back = t.front() == '-';
  if (rel) t.remove_prefix(1);
  ASSIGN_OR_RETURN(int64_t us, ParseTimeUs(t));
  if (rel) {
    out.request.args["delta_us"] = back ? -us : us;
  } else {
    out.request.args["us"] = us;
  }
  out.text = "seek " + words[1];
  return Status::Ok();
}

Status ParseCompare(const std::vector<std::string>& words, ParsedCommand& out) {
  constexpr std::string_view kUsage = "compare [event [W]] | compare FROM-TO FROM-TO";
  if (words.size() == 1 || words[1] == "event") {
    int64_t w = kDefaultCompareWindowUs;
    if (words.size() > 3)
      return InvalidArgument("compare event takes one window: compare event [W]");
    if (words.size() == 3) {
      ASSIGN_OR_RETURN(w, ParseTimeUs(words[2]));
      if (w <= 0) return InvalidArgument("compare window must be longer than 0");
    }
    out.request.args["around_us"] = w;
    out.text = words.size() == 3 ? "compare event " + words[2] : "compare event";
    return Status::Ok();
  }
  if (words.size() != 3)
    return InvalidArgument("compare needs two windows: " + std::string(kUsage));
  ASSIGN_OR_RETURN(TimeRange a, ParseTimeRange(words[1]));
  ASSIGN_OR_RETURN(TimeRange b, ParseTimeRange(words[2]));
  out.request.args["a"] = {a.from_us, a.to_us};
  out.request.args["b"] = {b.from_us, b.to_us};
  out.text = "compare " + words[1] + " " + words[2];
  return Status::Ok();
}

std::string FormatPosition(int64_t us) {
  char buf[48];
  const bool neg = us < 0;
  const double s = std::abs(static_cast<double>(us)) / 1e6;
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%s%.1fs", neg ? "-" : "", s);
  } else if (s < 3600) {
    const int m = static_cast<int>(s / 60);
    std::snprintf(buf, sizeof buf, "%s%dm%04.1fs", neg ? "-" : "", m, s - m * 60);
  } else {
    const long long t = static_cast<long long>(s);
    std::snprintf(buf, sizeof buf, "%s%lldh%02lldm%02llds", neg ? "-" : "", t / 3600, (t / 60) % 60,
                  t % 60);
  }
  return buf;
}

}  // namespace sy::console
