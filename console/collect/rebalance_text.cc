#include "console/collect/rebalance_text.h"

#include <cstdio>

#include "console/collect/json_read.h"

namespace sy::console {

using nlohmann::json;

namespace {

double Num(const json& j, const char* key) { return JsonNum(j, key); }
int64_t Int(const json& j, const char* key) { return JsonInt(j, key); }
std::string Str(const json& j, const char* key) { return JsonStr(j, key); }
bool Bool(const json& j, const char* key) { return JsonBool(j, key); }

const json& Field(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it != j.end() ? *it : kNull;
}

// Mean of a JSON array of numbers (non-numbers skipped); 0 when empty.
double MeanOf(const json& j) {
  if (!j.is_array()) return 0;
  double sum = 0;
  int n = 0;
  for (const json& x : j) {
    if (!x.is_number()) continue;
    sum += x.get<double>();
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

std::string Fmt(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Bal(double v) { return Fmt("%.2f", v); }
std::string Ms(double v) { return Fmt(v < 10 ? "%.2fms" : "%.1fms", v); }

}  // namespace

PlanSummary SummarizePlan(const json& plan) {
  PlanSummary p;
  p.experts_moved = static_cast<int>(Int(plan, "experts_moved"));
  p.bytes = Int(plan, "bytes");
  p.window = static_cast<int>(Int(plan, "window"));
  double before = 0, after = 0;
  if (plan.is_object() && plan.contains("layers") && plan["layers"].is_array()) {
    for (const json& l : plan["layers"]) {
      ++p.layers;
      before += Num(l, "before");
      after += Num(l, "after");
      if (Int(l, "moved") > 0) ++p.layers_moved;
    }
  }
  p.before = p.layers > 0 ? before / p.layers : 1.0;
  p.after = p.layers > 0 ? after / p.layers : 1.0;
  return p;
}

std::string FormatMoveBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (b < 1024.0 * 1024) return Fmt(b < 10 * 1024.0 ? "%.2f KiB" : "%.0f KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return Fmt("%.2f MiB", b / (1024.0 * 1024));
  return Fmt("%.2f GiB", b / (1024.0 * 1024 * 1024));
}

std::vector<std::string> PlanLines(const json& plan, int max_layers) {
  const PlanSummary p = SummarizePlan(plan);
  std::vector<std::string> out;
  out.push_back("plan: " + std::to_string(p.experts_moved) + " experts move (" +
                FormatMoveBytes(p.bytes) + ") in " + std::to_string(p.layers_moved) + " of " +
                std::to_string(p.layers) + " layers, window " + std::to_string(p.window) +
                " steps; balancedness " + Bal(p.before) + " -> " + Bal(p.after));
  if (p.layers == 0) return out;
  out.push_back("  layer  before  after  moved");
  int shown = 0;
  for (const json& l : plan["layers"]) {
    if (shown == max_layers) {
      out.push_back("  … " + std::to_string(p.layers - shown) + " more layers");
      break;
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "  L%-4lld  %6.2f  %5.2f  %5lld",
                  static_cast<long long>(Int(l, "layer")), Num(l, "before"), Num(l, "after"),
                  static_cast<long long>(Int(l, "moved")));
    out.emplace_back(buf);
    ++shown;
  }
  return out;
}

std::string PlanQuestion(const PlanSummary& p) {
  return "Apply: " + std::to_string(p.experts_moved) + " experts, " + FormatMoveBytes(p.bytes) +
         ", balancedness " + Bal(p.before) + " -> " + Bal(p.after) + "? (y/n)";
}

std::vector<std::string> RebalanceEventLines(const telemetry::Event& e) {
  const json& d = e.detail;
  std::vector<std::string> out;
  std::string head = "rebalance " + (e.name == "auto" ? "auto " : std::string()) + e.phase;
  if (e.name == "auto") {
    out.push_back(head + (e.message.empty() ? "" : ": " + e.message));
    return out;
  }
  if (e.phase == "planned") {
    std::vector<std::string> table = PlanLines(d);
    table[0] = head + " " + table[0];
    return table;
  }
  if (e.phase == "layer") {
    out.push_back(head + " L" + std::to_string(Int(d, "layer")) + " committed: " +
                  std::to_string(Int(d, "moved")) + " moved, " + FormatMoveBytes(Int(d, "bytes")) +
                  ", staged " + Ms(Num(d, "stage_ms")) + ", pause " + Ms(Num(d, "commit_ms")));
    return out;
  }
  if (e.phase == "done") {
    out.push_back(head + ": " + std::to_string(Int(d, "layers")) + " layers, " +
                  std::to_string(Int(d, "experts_moved")) + " experts, " +
                  FormatMoveBytes(Int(d, "bytes")) + "; balancedness " +
                  Bal(MeanOf(Field(d, "before"))) + " -> " + Bal(MeanOf(Field(d, "after"))) +
                  " predicted, longest pause " + Ms(Num(d, "longest_pause_ms")));
    return out;
  }
  if (e.phase == "measured") {
    out.push_back(head + ": balancedness " + Bal(Num(d, "balancedness_before")) + " -> " +
                  Bal(Num(d, "balancedness_after")) + " over " + std::to_string(Int(d, "steps")) +
                  " steps each side, MoE " + Ms(Num(d, "moe_ms_before")) + " -> " +
                  Ms(Num(d, "moe_ms_after")) + " per step");
    return out;
  }
  if (e.phase == "failed") {
    const bool rolled_back = Bool(d, "rolled_back");
    out.push_back(head + " at L" + std::to_string(Int(d, "layer")) + ": " + Str(d, "error") +
                  (rolled_back ? "; rolled back to the old placement"
                               : "; NOT rolled back (placement mixed)"));
    return out;
  }
  out.push_back(head + (e.message.empty() ? "" : ": " + e.message));
  return out;
}

void ApplyRebalanceEvent(const telemetry::Event& e, RebalanceStatus& st) {
  if (e.kind != "rebalance") return;
  const json& d = e.detail;
  if (e.name == "auto") {
    st.auto_last = e.phase + (e.message.empty() ? "" : ": " + e.message);
    return;
  }
  st.t_us = e.env.t_us;
  if (e.phase == "planned") {
    // A new plan starts a new rebalance; only the auto settings carry over.
    const PlanSummary p = SummarizePlan(d);
    RebalanceStatus next;
    next.phase = "planned";
    next.t_us = e.env.t_us;
    next.layers_planned = p.layers_moved;
    next.experts_moved = p.experts_moved;
    next.bytes = p.bytes;
    next.before = p.before;
    next.after = p.after;
    next.auto_known = st.auto_known;
    next.auto_every = st.auto_every;
    next.auto_min_gain = st.auto_min_gain;
    next.auto_window = st.auto_window;
    next.auto_last = st.auto_last;
    st = std::move(next);
  } else if (e.phase == "layer") {
    st.phase = "layer";
    ++st.layers_done;
  } else if (e.phase == "done") {
    st.phase = "done";
    st.layers_done = static_cast<int>(Int(d, "layers"));
    st.experts_moved = static_cast<int>(Int(d, "experts_moved"));
    st.bytes = Int(d, "bytes");
    st.before = MeanOf(Field(d, "before"));
    st.after = MeanOf(Field(d, "after"));
    st.longest_pause_ms = Num(d, "longest_pause_ms");
    st.moe_ms_before = Num(d, "moe_ms_before");
  } else if (e.phase == "measured") {
    st.phase = "measured";
    st.measured_before = Num(d, "balancedness_before");
    st.measured_after = Num(d, "balancedness_after");
    st.moe_ms_before = Num(d, "moe_ms_before");
    st.moe_ms_after = Num(d, "moe_ms_after");
  } else if (e.phase == "failed") {
    st.phase = "failed";
    st.error = "L" + std::to_string(Int(d, "layer")) + ": " + Str(d, "error");
    st.rolled_back = Bool(d, "rolled_back");
  }
}

void ApplyRebalanceAutoResult(const json& result, RebalanceStatus& st) {
  if (!result.is_object()) return;
  st.auto_known = true;
  st.auto_every = static_cast<int>(Int(result, "every"));
  st.auto_min_gain = Num(result, "min_gain");
  st.auto_window = static_cast<int>(Int(result, "window"));
}

}  // namespace sy::console
