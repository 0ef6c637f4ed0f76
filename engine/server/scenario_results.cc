// File: engine/server/scenario_results.cc
#include "engine/server/scenario_results.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "engine/parallelism/switch_policy.h"

namespace sy::engine {
namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// t falls in one of the [from, to) windows.
bool InWindows(const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t t) {
  return std::any_of(windows.begin(), windows.end(),
                     [t](const auto& w) { return t >= w.first && t < w.second; });
}

std::string Fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

}  // namespace

double PhaseResult::Value() const {
  if (metric == "tpot") return tpot_mean_ms;
  if (metric == "throughput") return output_tok_s;
  if (metric == "makespan") return makespan_s;
  return ttft_mean_ms;
}

void ScenarioRecorder::OnStep(const telemetry::Step& step) {
  steps_.push_back({.end_us = step.start_us + step.dur_us,
                    .tokens = step.generated_total - last_generated_,
                    .balancedness = -1,
                    .running = step.running,
                    .waiting = step.waiting});
  last_generated_ = step.generated_total;
}

void ScenarioRecorder::OnExpertLoad(const telemetry::ExpertLoad& load) {
  if (steps_.empty() || load.balancedness.empty()) return;
  steps_.back().balancedness =
      std::accumulate(load.balancedness.begin(), load.balancedness.end(), 0.0) /
      static_cast<double>(load.balancedness.size());
}

void ScenarioRecorder::OnRequestDone(const telemetry::RequestDone& d) {
  if (d.finish == "cancelled") return;
  done_.push_back({.arrival_us = d.arrival_us,
                   .ttft_us = d.ttft_us,
                   .tpot_us = d.tpot_us,
                   .end_us = d.arrival_us + d.e2e_us,
                   .output_tokens = d.output_tokens});
}

void ScenarioRecorder::OnEvent(const telemetry::Event& e) {
  if (e.phase != "done") return;
  if (e.name == "switch") {
    ++switches_;
    SwitchPoint sp;
    sp.from = e.detail.value("from", std::string());
    sp.to = e.detail.value("to", std::string());
    // Observer events carry no envelope time; a switch completes between
    // steps, so the last step's end dates it.
    switch_log_.emplace_back(steps_.empty() ? 0 : steps_.back().end_us, std::move(sp));
  }
  if (e.name == "rebalance") ++rebalances_;
}

VariantResult ScenarioRecorder::Finish(const std::string& variant,
                                       const std::vector<ScenarioPhase>& phases,
                                       const std::vector<std::pair<int64_t, int64_t>>& windows,
                                       int64_t workload_start_us) const {
  VariantResult r;
  r.variant = variant;
  r.requests = static_cast<int64_t>(done_.size());
  r.steps = static_cast<int64_t>(steps_.size());
  r.switches = switches_;
  for (const auto& [t_us, sp] : switch_log_) {
    r.switch_log.push_back(sp);
    r.switch_log.back().at_s = static_cast<double>(t_us - workload_start_us) / 1e6;
  }
  r.rebalances = rebalances_;
  const int64_t last_us = steps_.empty() ? workload_start_us : steps_.back().end_us;
  r.sim_s = static_cast<double>(last_us - workload_start_us) / 1e6;
  int64_t tokens = 0;
  std::vector<double> bal_all;
  for (const StepPoint& s : steps_) {
    tokens += s.tokens;
    if (s.balancedness >= 0) bal_all.push_back(s.balancedness);
  }
  r.output_tok_s = r.sim_s > 0 ? static_cast<double>(tokens) / r.sim_s : 0;
  r.balancedness = Mean(bal_all);
  std::vector<std::pair<int64_t, int64_t>> abs;  // each phase's window on the serving clock
  for (size_t p = 0; p < phases.size(); ++p) {
    const int64_t from = workload_start_us + windows[p].first;
    // The last phase keeps the drain: it ends with the last step, whether
    // that is before or after its arrivals end.
    const int64_t to = p + 1 == phases.size() ? std::max(last_us + 1, from + 1)
                                              : workload_start_us + windows[p].second;
    abs.emplace_back(from, to);
    PhaseResult ph = Summarize({abs.back()});
    ph.name = phases[p].name;
    ph.metric = phases[p].metric;
    ph.start_s = static_cast<double>(windows[p].first) / 1e6;
    ph.end_s = static_cast<double>(to - workload_start_us) / 1e6;
    r.phases.push_back(std::move(ph));
  }
  // Pooled by metric: latency metrics only (a makespan or a rate over
  // disjoint windows is not one figure).
  std::vector<std::string> metrics;
  for (const ScenarioPhase& p : phases) {
    if ((p.metric == "ttft" || p.metric == "tpot") &&
        std::find(metrics.begin(), metrics.end(), p.metric) == metrics.end()) {
      metrics.push_back(p.metric);
    }
  }
  for (const std::string& m : metrics) {
    std::vector<std::pair<int64_t, int64_t>> group;
    std::vector<std::string> names;
    size_t first = phases.size(), last = 0;
    for (size_t p = 0; p < phases.size(); ++p) {
      if (phases[p].metric != m) continue;
      group.push_back(abs[p]);
      if (std::find(names.begin(), names.end(), phases[p].name) == names.end()) {
        names.push_back(phases[p].name);
      }
      first = std::min(first, p);
      last = p;
    }
    if (group.size() < 2) continue;
    PhaseResult ph = Summarize(group);
    for (const std::string& n : names) ph.name += (ph.name.empty() ? "" : "+") + n;
    ph.metric = m;
    ph.start_s = r.phases[first].start_s;
    ph.end_s = r.phases[last].end_s;
    r.pooled.push_back(std::move(ph));
  }
  return r;
}

double ScenarioRecorder::DecodeBatch(
    const std::vector<std::pair<int64_t, int64_t>>& windows) const {
  // Steps arrive in serving order, so their ends are sorted; prefix sums of
  // the running count make each request's sum two binary searches.
  std::vector<int64_t> ends(steps_.size()), prefix(steps_.size() + 1, 0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    ends[i] = steps_[i].end_us;
    prefix[i + 1] = prefix[i] + steps_[i].running;
  }
  assert(std::is_sorted(ends.begin(), ends.end()));
  int64_t running = 0, steps = 0;
  for (const Done& d : done_) {
    if (!InWindows(windows, d.arrival_us)) continue;
    // (first token, end]: the step that produced the first token is prefill.
    const auto lo = std::upper_bound(ends.begin(), ends.end(), d.arrival_us + d.ttft_us);
    const auto hi = std::upper_bound(ends.begin(), ends.end(), d.end_us);
    if (hi <= lo) continue;
    running += prefix[hi - ends.begin()] - prefix[lo - ends.begin()];
    steps += hi - lo;
  }
  return steps > 0 ? static_cast<double>(running) / static_cast<double>(steps) : 0;
}

PhaseResult ScenarioRecorder::Summarize(
    const std::vector<std::pair<int64_t, int64_t>>& windows) const {
  const auto in = [&](int64_t t) { return InWindows(windows, t); };
  PhaseResult ph;
  std::vector<double> ttft, tpot;
  int64_t last_end = windows.empty() ? 0 : windows.front().first;
  for (const Done& d : done_) {
    if (!in(d.arrival_us)) continue;
    ttft.push_back(static_cast<double>(d.ttft_us) / 1e3);
    if (d.output_tokens > 1) tpot.push_back(static_cast<double>(d.tpot_us) / 1e3);
    last_end = std::max(last_end, d.end_us);
  }
  ph.requests = static_cast<int>(ttft.size());
  ph.ttft_mean_ms = Mean(ttft);
  ph.ttft_p50_ms = Percentile(ttft, 0.50);
  ph.ttft_p99_ms = Percentile(ttft, 0.99);
  ph.tpot_mean_ms = Mean(tpot);
  ph.tpot_p50_ms = Percentile(tpot, 0.50);
  ph.tpot_p99_ms = Percentile(tpot, 0.99);
  if (!windows.empty()) ph.makespan_s = static_cast<double>(last_end - windows.front().first) / 1e6;
  int64_t tokens = 0;
  std::vector<double> bal;
  for (const StepPoint& s : steps_) {
    if (!in(s.end_us)) continue;
    tokens += s.tokens;
    if (s.balancedness >= 0) bal.push_back(s.balancedness);
    ph.running_max = std::max(ph.running_max, s.running);
    ph.waiting_max = std::max(ph.waiting_max, s.waiting);
  }
  double secs = 0;
  for (const auto& [from, to] : windows) secs += static_cast<double>(to - from) / 1e6;
  ph.output_tok_s = secs > 0 ? static_cast<double>(tokens) / secs : 0;
  ph.balancedness = Mean(bal);
  ph.decode_batch = DecodeBatch(windows);
  return ph;
}

std::vector<std::pair<int64_t, int64_t>> PhaseWindows(const WorkloadOptions& w, size_t phases) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (w.phases.empty()) {
    for (size_t i = 0; i < phases; ++i) out.emplace_back(0, INT64_MAX / 4);
    return out;
  }
  double t = 0;
  for (const WorkloadOptions::RatePhase& p : w.phases) {
    const double end = t + p.seconds;
    out.emplace_back(static_cast<int64_t>(t * 1e6), static_cast<int64_t>(end * 1e6));
    t = end;
  }
  return out;
}

Result<VariantResult> RunScenarioVariant(const Scenario& scenario, const std::string& variant,
                                         const ScenarioRunOptions& options) {
  ASSIGN_OR_RETURN(EngineOptions o, ScenarioEngineOptions(scenario, variant, options));
  ScenarioRecorder recorder;
  o.observer = &recorder;
  const std::vector<std::pair<int64_t, int64_t>> windows =
      PhaseWindows(o.workload, scenario.phases.size());
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(std::move(o)));
  const int64_t start_us = engine->clock_us();
  RETURN_IF_ERROR(engine->Run().WithContext("scenario " + scenario.name + " (" + variant + ")"));
  VariantResult r = recorder.Finish(variant, scenario.phases, windows, start_us);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<double> AutoVsBestStatic(const std::vector<VariantResult>& results, bool pooled) {
  const VariantResult *tp = nullptr, *ep = nullptr, *au = nullptr;
  for (const VariantResult& r : results) {
    if (r.variant == "tp") tp = &r;
    if (r.variant == "ep") ep = &r;
    if (r.variant == "auto") au = &r;
  }
  std::vector<double> out;
  if (!tp || !ep || !au) return out;
  const auto of = [pooled](const VariantResult* r) -> const std::vector<PhaseResult>& {
    return pooled ? r->pooled : r->phases;
  };
  for (size_t p = 0; p < of(au).size(); ++p) {
    const PhaseResult& a = of(au)[p];
    const double t = of(tp)[p].Value(), e = of(ep)[p].Value(), v = a.Value();
    if (a.HigherIsBetter()) {
      const double best = std::max(t, e);
      out.push_back(v > 0 ? best / v : 0);
    } else {
      const double best = std::min(t, e);
      out.push_back(best > 0 ? v / best : 0);
    }
  }
  return out;
}

std::string FormatScenarioTable(const Scenario& s, const std::vector<VariantResult>& results) {
  std::ostringstream os;
  os << s.name << ": " << s.model << " on " << s.devices << " x " << s.hardware;
  if (!s.source.empty()) os << " (" << s.source << ")";
  os << "\n";
  const VariantResult* tp = nullptr;
  const VariantResult* ep = nullptr;
  for (const VariantResult& r : results) {
    if (r.variant == "tp") tp = &r;
    if (r.variant == "ep") ep = &r;
  }
  // One block: a row per variant for phase (or pooled group) p, then the
  // best static layout and auto's distance from it.
  const auto block = [&](std::vector<PhaseResult> VariantResult::*list, size_t p,
                         const std::string& heading, const std::vector<double>& ratio) {
    os << "\n" << heading << "\n";
    os << "  variant   reqs  TTFT mean    p50     p99 ms  TPOT mean   p50   p99 ms  out tok/s  "
          "balanced  dec batch  run max  wait max\n";
    for (const VariantResult& r : results) {
      const PhaseResult& x = (r.*list)[p];
      os << "  " << r.variant << std::string(8 - std::min<size_t>(8, r.variant.size()), ' ')
         << Fmt("%6.0f", x.requests) << Fmt("%11.0f", x.ttft_mean_ms) << Fmt("%8.0f", x.ttft_p50_ms)
         << Fmt("%8.0f", x.ttft_p99_ms) << Fmt("%11.1f", x.tpot_mean_ms)
         << Fmt("%6.1f", x.tpot_p50_ms) << Fmt("%6.1f", x.tpot_p99_ms)
         << Fmt("%11.0f", x.output_tok_s) << Fmt("%10.3f", x.balancedness)
         << Fmt("%11.0f", x.decode_batch) << Fmt("%9.0f", x.running_max)
         << Fmt("%10.0f", x.waiting_max) << "\n";
    }
    if (p < ratio.size()) {
      const PhaseResult& t = (tp->*list)[p];
      const PhaseResult& e = (ep->*list)[p];
      const bool tp_best = t.HigherIsBetter() ? t.Value() >= e.Value() : t.Value() <= e.Value();
      os << "  best static: " << (tp_best ? "tp" : "ep") << "; auto is "
         << Fmt("%+.1f%%", (ratio[p] - 1) * 100)
         << (ratio[p] <= 1.10 ? " (within 10%)" : " (NOT within 10%)") << "\n";
    }
  };
  const std::vector<double> ratio = AutoVsBestStatic(results);
  for (size_t p = 0; !results.empty() && p < results[0].phases.size(); ++p) {
    const PhaseResult& h = results[0].phases[p];
    block(&VariantResult::phases, p,
          "phase " + std::to_string(p + 1) + " " + h.name + " [" + Fmt("%.0f", h.start_s) + "s, " +
              Fmt("%.0f", h.end_s) + "s)  metric: " + h.metric,
          ratio);
  }
  const std::vector<double> pooled_ratio = AutoVsBestStatic(results, /*pooled=*/true);
  for (size_t p = 0; !results.empty() && p < results[0].pooled.size(); ++p) {
    const PhaseResult& h = results[0].pooled[p];
    block(&VariantResult::pooled, p,
          "pooled: every " + h.metric + " phase (" + h.name + "), as seed 003 §9.2 reports them",
          pooled_ratio);
  }
  os << "\n  variant   switches  rebalances  steps   sim s   wall s  sim/wall  out tok/s  "
        "balanced\n";
  for (const VariantResult& r : results) {
    os << "  " << r.variant << std::string(8 - std::min<size_t>(8, r.variant.size()), ' ')
       << Fmt("%10.0f", r.switches) << Fmt("%12.0f", r.rebalances)
       << Fmt("%7.0f", static_cast<double>(r.steps)) << Fmt("%8.1f", r.sim_s)
       << Fmt("%9.1f", r.wall_s) << Fmt("%9.1f", r.wall_s > 0 ? r.sim_s / r.wall_s : 0)
       << Fmt("%11.0f", r.output_tok_s) << Fmt("%10.3f", r.balancedness) << "\n";
  }
  auto latency = [](double us) {
    return us < 0 ? std::string("the hardware's") : Fmt("%g us", us);
  };
  os << "  sim: kernels " << s.kernels << ", collective latency: all-reduce "
     << latency(s.allreduce_latency_us) << ", all-to-all " << latency(s.all_to_all_latency_us)
     << "\n";
  for (const VariantResult& r : results) {
    if (r.variant == "auto") {
      PolicyOptions p;
      p.t_high = s.t_high;
      os << "  auto policy: T_h " << s.t_high << ", T_l " << Fmt("%.1f", EffectiveTLow(p)) << "\n";
    }
  }
  for (const VariantResult& r : results) {
    if (r.switch_log.empty()) continue;
    os << "  " << r.variant << " switched:";
    for (const SwitchPoint& sp : r.switch_log) {
      os << " " << sp.from << "->" << sp.to << Fmt(" at %.1fs", sp.at_s)
         << (&sp == &r.switch_log.back() ? "" : ",");
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace sy::engine
