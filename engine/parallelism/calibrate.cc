#include "engine/parallelism/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace sy::engine {
namespace {

constexpr int kChartWidth = 40;

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// 41.27 -> "41.3", 42 -> "42".
std::string Short(double v) { return Fmt("%.6g", std::round(v * 10.0) / 10.0); }

bool EpFaster(const LatencyPoint& p) { return p.tp_ms > p.ep_ms; }

std::string_view FasterName(const LatencyPoint& p) {
  if (p.tp_ms == p.ep_ms) return "tie";
  return EpFaster(p) ? "ep" : "tp";
}

Status CheckLatency(size_t i, const LatencyPoint& p, const char* name, double v) {
  if (!std::isfinite(v) || v <= 0) {
    return InvalidArgument("calibrate: point " + std::to_string(i) + " (batch " +
                           std::to_string(p.batch) + "): " + name + " " + Fmt("%g", v) +
                           " must be a finite latency > 0");
  }
  return Status::Ok();
}

}  // namespace

std::string_view CrossoverKindName(CrossoverKind k) {
  switch (k) {
    case CrossoverKind::kCrossover:
      return "crossover";
    case CrossoverKind::kTpEverywhere:
      return "tp_everywhere";
    case CrossoverKind::kEpEverywhere:
      return "ep_everywhere";
    case CrossoverKind::kUnstable:
      return "unstable";
  }
  return "?";
}

Result<Calibration> FitCrossover(std::vector<LatencyPoint> points,
                                 const CalibrateOptions& options) {
  if (!std::isfinite(options.low_ratio) || options.low_ratio <= 0 || options.low_ratio > 1) {
    return InvalidArgument("calibrate: low_ratio " + Fmt("%g", options.low_ratio) +
                           " must be in (0, 1]");
  }
  if (points.size() < 2) {
    return InvalidArgument("calibrate: need at least 2 points (batch, tp_ms, ep_ms), got " +
                           std::to_string(points.size()));
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const LatencyPoint& p = points[i];
    if (p.batch < 1) {
      return InvalidArgument("calibrate: point " + std::to_string(i) + ": batch " +
                             std::to_string(p.batch) + " must be >= 1");
    }
    RETURN_IF_ERROR(CheckLatency(i, p, "tp_ms", p.tp_ms));
    RETURN_IF_ERROR(CheckLatency(i, p, "ep_ms", p.ep_ms));
    for (size_t j = 0; j < i; ++j) {
      if (points[j].batch == p.batch) {
        return InvalidArgument("calibrate: batch " + std::to_string(p.batch) +
                               " measured twice (points " + std::to_string(j) + " and " +
                               std::to_string(i) + "); average the runs first");
      }
    }
  }
  std::sort(points.begin(), points.end(),
            [](const LatencyPoint& a, const LatencyPoint& b) { return a.batch < b.batch; });

  Calibration c;
  c.points = std::move(points);
  const std::vector<LatencyPoint>& pts = c.points;
  const size_t n = pts.size();
  int ep_wins = 0;
  for (size_t i = 0; i < n; ++i) {
    ep_wins += EpFaster(pts[i]) ? 1 : 0;
    if (i > 0 && EpFaster(pts[i]) != EpFaster(pts[i - 1])) ++c.sign_changes;
  }
  const std::string lo = std::to_string(pts.front().batch);
  const std::string hi = std::to_string(pts.back().batch);
  const std::string noisy = c.sign_changes > 1 ? " Noisy: the faster layout changes " +
                                                     std::to_string(c.sign_changes) +
                                                     " times between neighbouring points."
                                               : "";

  if (ep_wins == 0) {
    c.kind = CrossoverKind::kTpEverywhere;
    c.summary = "TP at least as fast at every measured batch (" + lo + " to " + hi +
                "): no crossover in range; measure larger batches or keep TP.";
    return c;
  }
  if (ep_wins == static_cast<int>(n)) {
    c.kind = CrossoverKind::kEpEverywhere;
    c.summary = "EP faster at every measured batch (" + lo + " to " + hi +
                "): no crossover in range; the crossover lies below batch " + lo +
                ": measure smaller batches or keep EP.";
    return c;
  }
  if (!EpFaster(pts.back())) {
    c.kind = CrossoverKind::kUnstable;
    c.summary = "TP faster at the largest measured batch " + hi + " though EP is faster at " +
                std::to_string(ep_wins) + " of " + std::to_string(n) +
                " points: no stable crossover; measure again or at larger batches." + noisy;
    return c;
  }
  // EP wins at the top: the crossing is after the last point TP wins.
  size_t k = n - 1;
  while (EpFaster(pts[k])) --k;
  const LatencyPoint& a = pts[k];
  const LatencyPoint& b = pts[k + 1];
  const double da = a.tp_ms - a.ep_ms;  // <= 0
  const double db = b.tp_ms - b.ep_ms;  // > 0
  c.kind = CrossoverKind::kCrossover;
  c.lower_batch = a.batch;
  c.upper_batch = b.batch;
  c.crossover_batch = a.batch + (b.batch - a.batch) * (-da) / (db - da);
  c.has_thresholds = true;
  c.t_high = std::max(1, static_cast<int>(std::ceil(c.crossover_batch - 1e-9)));
  c.t_low = options.low_ratio * c.t_high;
  c.summary = "EP faster above batch " + Short(c.crossover_batch) + " (interpolated between " +
              std::to_string(a.batch) + " and " + std::to_string(b.batch) + "): T_h " +
              std::to_string(c.t_high) + ", T_l " + Short(c.t_low) + " (" +
              Short(options.low_ratio) + " T_h)." + noisy;
  if (c.sign_changes > 1) c.summary += " Crossover taken as the last TP->EP crossing.";
  return c;
}

std::string FormatCalibrationTable(const Calibration& c) {
  double max_ms = 0;
  for (const LatencyPoint& p : c.points) max_ms = std::max({max_ms, p.tp_ms, p.ep_ms});
  auto column = [&](double v) {
    if (max_ms <= 0) return 0;
    return static_cast<int>(std::lround(v / max_ms * (kChartWidth - 1)));
  };
  std::string out = "  batch      TP ms      EP ms  faster  TP/EP  step latency, 0 to " +
                    Fmt("%.3f", max_ms) + " ms (T = TP, E = EP, * = both)\n";
  bool crossover_drawn = false;
  auto crossover_row = [&]() {
    out += Fmt("%7.1f", c.crossover_batch) + "  " + std::string(33, '-') +
           " crossover: EP faster above\n";
    crossover_drawn = true;
  };
  for (const LatencyPoint& p : c.points) {
    if (c.kind == CrossoverKind::kCrossover && !crossover_drawn && p.batch > c.crossover_batch) {
      crossover_row();
    }
    std::string chart(kChartWidth, ' ');
    const int t = column(p.tp_ms);
    const int e = column(p.ep_ms);
    chart[t] = 'T';
    chart[e] = t == e ? '*' : 'E';
    char row[128];
    std::snprintf(row, sizeof row, "%7d %10.3f %10.3f  %-6s %6.2f  |", p.batch, p.tp_ms, p.ep_ms,
                  std::string(FasterName(p)).c_str(), p.tp_ms / p.ep_ms);
    out += row + chart + "|\n";
  }
  out += c.summary + "\n";
  return out;
}

std::string CalibrationToJson(const Calibration& c) {
  nlohmann::json j;
  j["points"] = nlohmann::json::array();
  for (const LatencyPoint& p : c.points) {
    j["points"].push_back(
        {{"batch", p.batch}, {"tp_ms", p.tp_ms}, {"ep_ms", p.ep_ms}, {"faster", FasterName(p)}});
  }
  j["kind"] = CrossoverKindName(c.kind);
  j["sign_changes"] = c.sign_changes;
  const bool found = c.kind == CrossoverKind::kCrossover;
  j["crossover_batch"] = found ? nlohmann::json(c.crossover_batch) : nlohmann::json(nullptr);
  j["lower_batch"] = found ? nlohmann::json(c.lower_batch) : nlohmann::json(nullptr);
  j["upper_batch"] = found ? nlohmann::json(c.upper_batch) : nlohmann::json(nullptr);
  j["t_high"] = c.has_thresholds ? nlohmann::json(c.t_high) : nlohmann::json(nullptr);
  j["t_low"] = c.has_thresholds ? nlohmann::json(c.t_low) : nlohmann::json(nullptr);
  j["summary"] = c.summary;
  return j.dump();
}

}  // namespace sy::engine
