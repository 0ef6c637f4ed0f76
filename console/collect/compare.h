// File: console/collect/compare.h
//
// Compare: two time windows of one run, or of two runs, side by side. A
// WindowAccumulator reduces the stored messages of one window to its
// overview figures and top kernels (WindowFigures); Compare() lines two of
// them up with their deltas, and names the change in one line ("B vs A:
// TPOT -18%, MoE share 41% -> 29%"). The draw side is DrawCompare
// (console/draw/compare.h); loading windows from a store is
// console/app/compare_loader.h.
//
//   WindowAccumulator acc("before", 0, 30'000'000);
//   for (const telemetry::Message& m : messages) acc.Consume(m);
//   Comparison c = Compare(acc.Finish(), after.Finish());
//
// Definitions (all in engine time over the window [from_us, to_us)):
//   throughput   tokens of the window's steps / window seconds
//   batch        mean batch_requests per step
//   step time    mean Step.dur_us
//   TTFT / TPOT  p50 / p99 of the requests that finished in the window
//                (TPOT of requests with more than one output token)
//   layout       the layouts in force ("EP", or "EP>TP" when it switched)
//   kernels      KernelStats summed over steps and devices; share = the
//                kernel's time / all kernels' time (as the Kernels view)
//   MoE share    the share of the MoE block's kernels: IsMoeKernel()
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "console/collect/snapshot.h"
#include "telemetry/protocol.h"

namespace sy::console {

// The kernels of the MoE block as the engine names them (router, dispatch,
// expert_ffn, combine, shared_expert, notify, and the TP layout's tp_gather /
// tp_allreduce), plus any name containing "moe" or "expert".
bool IsMoeKernel(std::string_view name);

struct WindowFigures {
  std::string label;  // e.g. "run-a 0.0s-30.0s"
  int64_t from_us = 0;
  int64_t to_us = 0;
  int64_t steps = 0;
  int64_t requests = 0;  // finished in the window
  double prefill_tps = 0;
  double decode_tps = 0;
  double batch_mean = 0;
  double step_us_mean = 0;
  Percentiles ttft;
  Percentiles tpot;
  std::string layout;              // "" when unknown
  std::vector<KernelRow> kernels;  // every kernel, by share descending
  double moe_share = 0;            // 0..1; 0 without kernel stats
  int64_t kernel_steps = 0;        // steps the kernel figures cover
};

class WindowAccumulator {
 public:
  // REQUIRES: from_us < to_us.
  WindowAccumulator(std::string label, int64_t from_us, int64_t to_us);
  // The layout in force when the window opens (from the run's Meta before
  // it); a Meta inside the window appends its layout if it differs.
  void SetInitialLayout(const std::string& layout);
  // Messages outside [from_us, to_us) are ignored.
  void Consume(const telemetry::Message& m);
  WindowFigures Finish() const;

 private:
  void AddLayout(const std::string& layout);

  WindowFigures f_;
  int64_t prefill_tokens_ = 0, decode_tokens_ = 0, batch_sum_ = 0, dur_sum_ = 0;
  std::vector<int64_t> ttft_, tpot_;
  std::vector<std::string> layouts_;
  struct KernelSum {
    std::string kind;
    int64_t count = 0, total_us = 0, max_us = 0;
  };
  std::map<std::string, KernelSum> kernels_;
};

// One overview figure of both windows. Numbers stay numbers (the draw side
// formats them by `unit`); the change is computed here.
struct FigureDelta {
  enum class Unit { kRate, kCount, kUs, kFraction, kText };
  std::string name;  // "decode tok/s"
  Unit unit = Unit::kCount;
  double a = 0, b = 0;
  std::string text_a, text_b;  // kText (layout)
  // "+12%" (relative change), "-12.0 pts" (kFraction), "changed" (kText), ""
  // when there is no base (a is 0) or nothing changed (kText).
  std::string delta;
  // -1 worse, 0 neutral or unknown, +1 better (B against A), for colour.
  int verdict = 0;
};

struct KernelDelta {
  std::string name, kind;
  double share_a = 0, share_b = 0;       // 0..1
  int64_t mean_a_us = 0, mean_b_us = 0;  // per call
};

struct Comparison {
  WindowFigures a, b;
  std::vector<FigureDelta> figures;  // fixed order: see compare.cc
  std::vector<KernelDelta> kernels;  // the union of both windows' top `top`, by max share
  std::string summary;               // "B vs A: decode tok/s +12%, TPOT p50 -18%, ..."
};

// REQUIRES: top >= 0.
Comparison Compare(const WindowFigures& a, const WindowFigures& b, int top = 8);

// "+12%" for b against a; "" when a is 0 (no base to compare with).
std::string PercentChange(double a, double b);

}  // namespace sy::console
