// File: engine/sim/routing_model.h
//
// RoutingModel: where the simulated backend's tokens go. No router runs
// under `--backend sim`, so each MoE layer's routed-token counts are sampled
// from a skewed, drifting expert popularity, the load pattern seed 004
// measures on DeepSeek-V3 (a few hot experts per layer, different per layer,
// moving over time) and the reason EPLB exists:
//
//   popularity of expert e in layer l at time t  ∝  1 / (rank_l,t(e) + 1)^skew
//
// rank_l,t is a permutation of the experts fixed by (seed, layer) at t = 0
// that drifts: every `drift_period_s` of simulated time, `drift_fraction` of
// the experts swap ranks with a random partner. Each token picks top_k
// distinct experts without replacement from the popularity (large batches
// use an equal-mean approximation of that draw so a 16k-token prefill costs
// O(experts) per layer, not O(tokens x top_k)). Counts are a pure function
// of (options, layer, t_us, tokens, the call sequence): a run is replayed by
// its seed, which the run's metadata records, and its counts are published
// per step like the CPU backend's.
//
//   ASSIGN_OR_RETURN(RoutingModel m, RoutingModel::Create(94, 128, 8, {.skew = 1.0}));
//   std::vector<int64_t> counts;   // [experts], sums to tokens * top_k
//   m.Sample(/*layer=*/5, /*tokens=*/256, /*t_us=*/1'000'000, &counts);
//
// Thread-safety: none; owned by the SimRunner (runner thread).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "base/status.h"

namespace sy::engine {

struct RoutingModelOptions {
  double skew = 1.0;            // Zipf exponent; 0 is uniform routing
  double drift_period_s = 10;   // simulated seconds between drifts; 0: never drifts
  double drift_fraction = 0.1;  // share of experts that swap rank at each drift
  uint64_t seed = 1;
};

class RoutingModel {
 public:
  // INVALID_ARGUMENT for layers < 1, experts < 1, top_k outside [1, experts],
  // a negative or non-finite skew, drift_period_s < 0 or drift_fraction
  // outside [0, 1].
  static Result<RoutingModel> Create(int layers, int experts, int top_k,
                                     const RoutingModelOptions& options);

  // Routed rows per expert of `layer` for `tokens` tokens at simulated time
  // t_us: counts->size() == experts, sum == tokens * top_k, no expert above
  // `tokens`. t_us must not decrease between calls (drift is applied up to
  // it). REQUIRES: 0 <= layer < layers, tokens >= 0.
  void Sample(int layer, int64_t tokens, int64_t t_us, std::vector<int64_t>* counts);
  // The current popularity of `layer` (sums to 1), for tests and the docs.
  std::vector<double> Popularity(int layer) const;
  // The probability that one token's top_k picks include each expert of
  // `layer` now (sums to top_k, none above 1): the exact inclusion
  // probabilities of drawing top_k without replacement from the popularity
  // (a numerical integral, routing_model.cc), which is the mean of
  // counts[e] / tokens in both of Sample's draws.
  std::vector<double> Inclusion(int layer) const;
  const RoutingModelOptions& options() const { return options_; }

  // Sample uses the exact per-token draw when tokens * top_k is at most
  // this many rows per expert times experts, the equal-mean approximation
  // above it.
  static constexpr int kExactRowsPerExpert = 1;

 private:
  // Vose alias table over ranks: one 64-bit draw picks a rank.
  struct Alias {
    std::vector<double> prob;
    std::vector<int> alias;
    void Build(const std::vector<double>& weights);
    int Draw(uint64_t bits) const;
  };

  RoutingModel(int layers, int experts, int top_k, const RoutingModelOptions& options);
  void DriftTo(int64_t t_us);
  void ApplyDrift(int64_t n);  // the n-th drift (1-based), a pure function of (seed, n)
  void SampleExact(int layer, int64_t tokens, std::vector<int64_t>* counts);
  void SampleApprox(int layer, int64_t tokens, std::vector<int64_t>* counts);
  double Normal();  // standard normal (inverse-CDF table)

  int layers_, experts_, top_k_;
  RoutingModelOptions options_;
  std::vector<std::vector<int>> rank_;            // [layer][expert] -> rank
  std::vector<std::vector<int>> expert_of_rank_;  // [layer][rank] -> expert
  std::vector<double> weight_;                    // [rank] -> popularity (sums to 1)
  std::vector<double> inclusion_;                 // [rank] -> inclusion probability
  Alias by_weight_, by_inclusion_;
  std::vector<int> chosen_;  // scratch: one token's ranks
  // SampleApprox's per-rank mean (+ 0.5) and deviation for approx_tokens_.
  int64_t approx_tokens_ = -1;
  std::vector<double> approx_mean_, approx_sd_;
  std::mt19937_64 rng_;
  uint64_t spare_bits_ = 0;  // unused bits of the last 64-bit draw for Normal()
  int spare_draws_ = 0;
  int64_t drifts_applied_ = 0;
};

}  // namespace sy::engine
