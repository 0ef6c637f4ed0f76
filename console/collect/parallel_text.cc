#include "console/collect/parallel_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "console/collect/json_read.h"
#include "console/collect/rebalance_text.h"

namespace sy::console {

using nlohmann::json;

namespace {

std::string Fixed(double v, const char* fmt = "%.1f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "24" for a whole number, "19.2" otherwise.
std::string Short(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g", std::round(v * 10) / 10);
  return buf;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string FromTo(const json& d) {
  return Upper(JsonStr(d, "from")) + " -> " + Upper(JsonStr(d, "to"));
}

std::string Why(const json& d) {
  const std::string why = JsonStr(d, "why");
  return why.empty() ? "" : " (" + why + ")";
}

std::vector<LogLine> SwitchLines(const telemetry::Event& e) {
  const json& d = e.detail;
  const int64_t t = e.env.t_us;
  if (e.phase == "done") {
    std::string text =
        "switch " + FromTo(d) + " in " + Fixed(JsonNum(d, "total_ms")) + " ms: weights " +
        Fixed(JsonNum(d, "weights_ms")) + " ms (" + Fixed(JsonNum(d, "gbps")) + " GB/s: permute " +
        Fixed(JsonNum(d, "permute_ms")) + ", exchange " + Fixed(JsonNum(d, "exchange_ms")) +
        ", place " + Fixed(JsonNum(d, "place_ms")) + "), state " + Fixed(JsonNum(d, "state_ms")) +
        " ms (" + std::to_string(JsonInt(d, "kv_pages")) + " pages, " +
        std::to_string(JsonInt(d, "state_slots")) + " slots, " +
        FormatMoveBytes(JsonInt(d, "state_bytes")) + "), other " + Fixed(JsonNum(d, "other_ms"));
    if (JsonNum(d, "rollback_ms") > 0) text += ", rollback " + Fixed(JsonNum(d, "rollback_ms"));
    text += "; " + FormatMoveBytes(JsonInt(d, "bytes")) + ", " +
            std::to_string(JsonInt(d, "layers")) + " layers" + Why(d);
    // TP -> EP re-homed requests first (Algorithm 4).
    if (const auto it = d.find("rehome"); it != d.end() && it->is_object()) {
      text += "; re-homed " + std::to_string(JsonInt(*it, "moved")) + " of " +
              std::to_string(JsonInt(*it, "requests")) + " requests (" +
              std::to_string(JsonInt(*it, "moved_pages")) + " pages)";
    }
    return {LogLine{t, LogLevel::kInfo, std::move(text)}};
  }
  const std::string error = JsonStr(d, "error").empty() ? e.message : JsonStr(d, "error");
  if (e.phase == "failed") {
    const bool rolled_back = JsonBool(d, "rolled_back");
    return {LogLine{
        t, LogLevel::kError,
        "switch " + FromTo(d) + " FAILED: " + error +
            (rolled_back ? "; rolled back to " + Upper(JsonStr(d, "from")) : "; NOT rolled back") +
            Why(d)}};
  }
  if (e.phase == "refused") {
    return {LogLine{t, LogLevel::kWarn, "switch " + FromTo(d) + " refused: " + error + Why(d)}};
  }
  return {LogLine{t, LogLevel::kInfo,
                  "switch " + e.phase + (e.message.empty() ? "" : ": " + e.message)}};
}

std::vector<LogLine> PolicyLines(const telemetry::Event& e) {
  const json& d = e.detail;
  std::string text = "policy";
  if (JsonHasNum(d, "step")) text += " step " + std::to_string(JsonInt(d, "step"));
  const std::string action = JsonStr(d, "action");
  text += ": " + (e.message.empty() ? JsonStr(d, "why") : e.message);
  if (!action.empty() && action != "none") text += " [" + action + "]";
  return {LogLine{e.env.t_us, LogLevel::kInfo, std::move(text)}};
}

std::string BatchList(const json& batches) {
  std::string out;
  if (!batches.is_array()) return out;
  for (const json& b : batches) {
    if (!b.is_number()) continue;
    out += (out.empty() ? "" : ",") + std::to_string(b.get<int64_t>());
  }
  return out;
}

// "crossover batch 23.4: T_h 24, T_l 19.2 (applied)" or the kind.
std::string FitText(const json& d) {
  if (!JsonHasNum(d, "crossover_batch")) {
    const std::string kind = JsonStr(d, "kind");
    return "no crossover (" + (kind.empty() ? std::string("unknown") : kind) + ")";
  }
  return "crossover batch " + Short(JsonNum(d, "crossover_batch")) + ": T_h " +
         std::to_string(JsonInt(d, "t_high")) + ", T_l " + Short(JsonNum(d, "t_low")) +
         (JsonBool(d, "applied") ? " (applied to the policy)" : " (not applied)");
}

// ", prompt 512 (simulated)" from a calibrate start's fields; empty for an
// engine that sends neither (older runs: prompt 16 on the wall clock).
std::string CalibrateShape(const json& d) {
  std::string t;
  if (const int64_t prompt = JsonInt(d, "prompt_len"); prompt > 0) {
    t += ", prompt " + std::to_string(prompt);
  }
  if (JsonStr(d, "clock") == "simulated") t += " (simulated)";
  return t;
}

std::vector<LogLine> CalibrateLines(const telemetry::Event& e) {
  const json& d = e.detail;
  const int64_t t = e.env.t_us;
  if (e.phase == "started") {
    std::string text = "calibrate started: batches " +
                       BatchList(d.is_object() && d.contains("batches") ? d["batches"] : json()) +
                       ", " + std::to_string(JsonInt(d, "steps")) + " steps each" +
                       CalibrateShape(d);
    if (JsonBool(d, "apply")) text += ", apply";
    return {LogLine{t, LogLevel::kInfo, std::move(text)}};
  }
  if (e.phase == "done") {
    std::vector<LogLine> out;
    out.push_back(LogLine{t, LogLevel::kInfo, "calibrate done: " + FitText(d)});
    // The engine's table (header, one row per batch with a T/E chart, the
    // crossover row, the summary), one log line per text line.
    const std::string table = JsonStr(d, "table");
    size_t start = 0;
    while (start < table.size()) {
      size_t end = table.find('\n', start);
      if (end == std::string::npos) end = table.size();
      if (end > start)
        out.push_back(LogLine{t, LogLevel::kInfo, "  " + table.substr(start, end - start)});
      start = end + 1;
    }
    if (table.empty() && !JsonStr(d, "summary").empty()) {
      out.push_back(LogLine{t, LogLevel::kInfo, "  " + JsonStr(d, "summary")});
    }
    return out;
  }
  if (e.phase == "failed") {
    const std::string error = JsonStr(d, "error").empty() ? e.message : JsonStr(d, "error");
    return {LogLine{t, LogLevel::kError, "calibrate failed: " + error}};
  }
  return {LogLine{t, LogLevel::kInfo,
                  "calibrate " + e.phase + (e.message.empty() ? "" : ": " + e.message)}};
}

void ApplySwitch(const telemetry::Event& e, int64_t step, ParallelStatus& st, size_t max_switches) {
  if (e.phase != "done" && e.phase != "failed" && e.phase != "refused") return;
  const json& d = e.detail;
  SwitchMark m;
  m.t_us = e.env.t_us;
  m.step = step;
  m.phase = e.phase;
  m.from = Upper(JsonStr(d, "from"));
  m.to = Upper(JsonStr(d, "to"));
  m.total_ms = JsonNum(d, "total_ms");
  m.rolled_back = JsonBool(d, "rolled_back");
  m.why = e.phase == "done" ? JsonStr(d, "why") : JsonStr(d, "error");
  if (e.phase == "done") {
    ++st.switches_done;
    // meta follows with the new layout; until then the event is the news.
    if (!m.to.empty()) st.layout = m.to;
  } else if (e.phase == "failed") {
    ++st.switches_failed;
  } else {
    ++st.switches_refused;
  }
  st.switches.push_back(std::move(m));
  if (st.switches.size() > max_switches) {
    st.switches.erase(st.switches.begin(),
                      st.switches.begin() + static_cast<long>(st.switches.size() - max_switches));
  }
}

void ApplyDecision(const telemetry::Event& e, ParallelStatus& st) {
  const json& d = e.detail;
  PolicyDecision p;
  p.t_us = e.env.t_us;
  p.step = JsonHasNum(d, "step") ? JsonInt(d, "step") : -1;
  p.action = JsonStr(d, "action");
  p.why = JsonStr(d, "why");
  p.message = e.message;
  p.batch = static_cast<int>(JsonInt(d, "batch"));
  p.mean = JsonNum(d, "mean");
  p.cooldown_left = static_cast<int>(JsonInt(d, "cooldown_left"));
  st.decision = std::move(p);
}

void ApplyCalibrate(const telemetry::Event& e, CalibrationStatus& c) {
  const json& d = e.detail;
  if (e.phase == "started") {
    CalibrationStatus next;  // a new run replaces the last result
    next.phase = "started";
    next.t_us = e.env.t_us;
    if (d.is_object() && d.contains("batches") && d["batches"].is_array()) {
      for (const json& b : d["batches"]) {
        if (b.is_number()) next.batches.push_back(b.get<int>());
      }
    }
    c = std::move(next);
    return;
  }
  if (e.phase == "failed") {
    c.phase = "failed";
    c.t_us = e.env.t_us;
    c.error = JsonStr(d, "error").empty() ? e.message : JsonStr(d, "error");
    return;
  }
  if (e.phase != "done") return;
  c.phase = "done";
  c.t_us = e.env.t_us;
  c.points.clear();
  if (d.is_object() && d.contains("points") && d["points"].is_array()) {
    for (const json& p : d["points"]) {
      c.points.push_back(CalibrationPoint{static_cast<int>(JsonInt(p, "batch")),
                                          JsonNum(p, "tp_ms"), JsonNum(p, "ep_ms"),
                                          Upper(JsonStr(p, "faster"))});
    }
    std::sort(
        c.points.begin(), c.points.end(),
        [](const CalibrationPoint& a, const CalibrationPoint& b) { return a.batch < b.batch; });
  }
  c.kind = JsonStr(d, "kind");
  c.has_crossover = JsonHasNum(d, "crossover_batch");
  c.crossover_batch = JsonNum(d, "crossover_batch");
  c.t_high = static_cast<int>(JsonInt(d, "t_high"));
  c.t_low = JsonNum(d, "t_low");
  c.applied = JsonBool(d, "applied");
  c.summary = JsonStr(d, "summary");
  c.error.clear();
}

}  // namespace

bool IsParallelEvent(const telemetry::Event& e) {
  return e.kind == "switch" || e.kind == "policy" || e.kind == "calibrate";
}

void ApplyPolicyJson(const json& policy, SwitchPolicy& p) {
  if (!policy.is_object() || policy.empty()) return;
  p.known = true;
  if (const std::string mode = JsonStr(policy, "mode"); !mode.empty()) p.mode = mode;
  if (JsonHasNum(policy, "t_high")) p.t_high = static_cast<int>(JsonInt(policy, "t_high"));
  if (JsonHasNum(policy, "t_low")) p.t_low = JsonNum(policy, "t_low");
  if (auto it = policy.find("t_low_auto"); it != policy.end() && it->is_boolean()) {
    p.t_low_auto = it->get<bool>();
  }
  if (JsonHasNum(policy, "window")) p.window = static_cast<int>(JsonInt(policy, "window"));
  if (JsonHasNum(policy, "cooldown")) p.cooldown = static_cast<int>(JsonInt(policy, "cooldown"));
  if (JsonHasNum(policy, "queue")) p.queue = static_cast<int>(JsonInt(policy, "queue"));
  if (const std::string r = JsonStr(policy, "rollout"); !r.empty()) p.rollout = r;
  if (const std::string desc = JsonStr(policy, "describe"); !desc.empty()) p.describe = desc;
}

void ApplyParallelEvent(const telemetry::Event& e, int64_t step, ParallelStatus& st,
                        size_t max_switches) {
  if (e.kind == "switch") ApplySwitch(e, step, st, max_switches);
  if (e.kind == "policy" && e.name == "decision") ApplyDecision(e, st);
  if (e.kind == "calibrate") ApplyCalibrate(e, st.calibration);
}

std::vector<LogLine> ParallelEventLines(const telemetry::Event& e) {
  if (e.kind == "switch") return SwitchLines(e);
  if (e.kind == "policy") return PolicyLines(e);
  if (e.kind == "calibrate") return CalibrateLines(e);
  return {};
}

std::string ParallelReplyText(const std::string& cmd, const json& result) {
  if (!result.is_object()) return "";
  if (cmd == "switch") {
    if (JsonInt(result, "layers") == 0) return "already " + Upper(JsonStr(result, "to"));
    return FromTo(result) + " in " + Fixed(JsonNum(result, "total_ms")) + " ms";
  }
  if (cmd == "policy") {
    if (const std::string d = JsonStr(result, "describe"); !d.empty()) return d;
    return JsonStr(result, "mode") + ", T_h " + std::to_string(JsonInt(result, "t_high")) +
           ", T_l " + Short(JsonNum(result, "t_low")) + ", window " +
           std::to_string(JsonInt(result, "window")) + ", cooldown " +
           std::to_string(JsonInt(result, "cooldown")) +
           (JsonHasNum(result, "queue") ? ", queue " + std::to_string(JsonInt(result, "queue"))
                                        : "");
  }
  if (cmd == "expert_stats") {
    char bal[16];
    std::snprintf(bal, sizeof bal, "%.2f", JsonNum(result, "balancedness_mean"));
    std::string t = "balancedness " + std::string(bal) + " over " +
                    std::to_string(JsonInt(result, "window_steps")) + " steps";
    const json hot = result.contains("hottest") ? result["hottest"] : json();
    if (hot.is_array() && !hot.empty() && hot[0].is_object()) {
      t += ", hottest L" + std::to_string(JsonInt(hot[0], "layer")) + " e" +
           std::to_string(JsonInt(hot[0], "expert")) + " (" +
           Short(100 * JsonNum(hot[0], "share")) + "% of its layer)";
    }
    if (const std::string path = JsonStr(result, "path"); !path.empty()) {
      t += "; written to " + path;
    }
    return t;
  }
  if (cmd == "calibrate") {
    return "started: batches " +
           BatchList(result.contains("batches") ? result["batches"] : json()) + ", " +
           std::to_string(JsonInt(result, "steps")) + " steps each" + CalibrateShape(result) +
           (JsonBool(result, "apply") ? ", apply" : "") + "; result in the Log";
  }
  return "";
}

}  // namespace sy::console
