// File: engine/parallelism/calibrate.h
//
// Calibration of the switch thresholds from measurements (seed 003 W1: the
// paper's T_h = 256 is hand-tuned for one model on one machine). The caller
// measures the step latency of both layouts at several batch sizes; these
// pure functions find the crossover batch size B* where EP becomes faster than
// TP and recommend T_h and T_l for SwitchPolicy.
//
//   Result<Calibration> c = FitCrossover({{1, 2.0, 3.1}, {64, 6.0, 5.2}, {256, 19, 12}});
//   // c->kind == CrossoverKind::kCrossover, c->crossover_batch ~= 37.5
//   // (between 1 and 64), c->t_high == 38, c->t_low == 30.4
//   std::puts(FormatCalibrationTable(*c).c_str());
//   Publish(CalibrationToJson(*c));
//
// The fit, on the points sorted by batch, with d(b) = tp_ms - ep_ms (> 0: EP
// faster, == 0 counts as TP since switching to a tie buys nothing):
//   - EP faster at no point: kTpEverywhere, no thresholds;
//   - EP faster at every point: kEpEverywhere, no thresholds (the crossover
//     lies below the smallest batch measured: measure smaller batches);
//   - EP faster at the largest batch: the crossover is interpolated linearly
//     between the last point where TP wins and the next one, so EP wins at
//     every measured batch above it. Earlier, noisy crossings (sign_changes >
//     1) are ignored and noted in `summary`;
//   - TP faster at the largest batch but EP faster somewhere below:
//     kUnstable, no thresholds (noise or a non-monotone system; measure
//     again or further).
// Thresholds: T_h = ceil(B*) (the smallest integer batch at which EP is
// predicted not slower), at least 1; T_l = low_ratio * T_h (0.8, the paper's
// ratio).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sy::engine {

// Mean step latency of each layout at one batch size.
struct LatencyPoint {
  int batch = 0;
  double tp_ms = 0;
  double ep_ms = 0;
};

struct CalibrateOptions {
  // T_l / T_h. Lower widens the hysteresis band: fewer switches, more steps
  // spent in EP below the crossover. REQUIRES 0 < low_ratio <= 1.
  double low_ratio = 0.8;
};

enum class CrossoverKind { kCrossover, kTpEverywhere, kEpEverywhere, kUnstable };
// "crossover", "tp_everywhere", "ep_everywhere", "unstable" (JSON values: never rename).
std::string_view CrossoverKindName(CrossoverKind k);

struct Calibration {
  std::vector<LatencyPoint> points;  // sorted by batch
  CrossoverKind kind = CrossoverKind::kTpEverywhere;
  // Set only for kCrossover: B* and the bracketing measured batches
  // (lower_batch <= crossover_batch < upper_batch).
  double crossover_batch = 0;
  int lower_batch = 0;
  int upper_batch = 0;
  // Times the faster layout changes between neighbouring points; > 1 means
  // noisy or non-monotone measurements.
  int sign_changes = 0;
  // Set only for kCrossover.
  bool has_thresholds = false;
  int t_high = 0;
  double t_low = 0;
  // One or two sentences: what was found and what to do, e.g. "EP faster
  // above batch 37.5 (interpolated between 1 and 64): T_h 38, T_l 30.4 (0.8 T_h)."
  std::string summary;
};

// INVALID_ARGUMENT with a precise message for: fewer than 2 points, a batch
// < 1, a latency that is not a finite number > 0, a batch measured twice, or
// low_ratio outside (0, 1].
Result<Calibration> FitCrossover(std::vector<LatencyPoint> points,
                                 const CalibrateOptions& options = {});

// ASCII table: one row per point (batch, TP ms, EP ms, faster, TP/EP and a
// strip chart with T = TP, E = EP, * = both), a row marking the crossover
// where it falls, and the summary line.
std::string FormatCalibrationTable(const Calibration& c);

// {"points": [{"batch", "tp_ms", "ep_ms", "faster"}...], "kind", "sign_changes",
//  "crossover_batch", "lower_batch", "upper_batch", "t_high", "t_low" (these
// five null unless found), "summary"}; one line.
std::string CalibrationToJson(const Calibration& c);

}  // namespace sy::engine
