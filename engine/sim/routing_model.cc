#include "engine/sim/routing_model.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <string>

namespace sy::engine {

namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform index in [0, n) from 32 random bits (n < 2^32): no modulo bias
// worth the name, and the same on every platform (std::uniform_int_distribution
// is implementation-defined, which would break replays across builds).
int UniformIndex(uint64_t bits, int n) {
  return static_cast<int>(((bits >> 32) * static_cast<uint64_t>(n)) >> 32);
}

// Acklam's rational approximation of the standard normal quantile, polished
// by one Halley step on erfc (relative error ~1e-15).
double NormalQuantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

// 4096 equiprobable normal quantiles (bin midpoints): a draw is one table
// read. Tails are cut at +-3.5 sigma, which routing counts never notice.
constexpr int kNormalBits = 12;
const std::array<double, 1 << kNormalBits>& NormalTable() {
  static const std::array<double, 1 << kNormalBits> table = [] {
    std::array<double, 1 << kNormalBits> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = NormalQuantile((i + 0.5) / t.size());
    return t;
  }();
  return table;
}

// The probability that item i is among k drawn without replacement with
// probability proportional to w (successive sampling). Equivalently each item
// gets an exponential key X_i ~ Exp(w_i) and the k smallest keys win, so
//   pi_i = integral over t of w_i e^(-w_i t) P(fewer than k of the other keys < t) dt,
// where the other keys fall below t independently with q_j = 1 - e^(-w_j t)
// (a Poisson-binomial count). The integral runs over a log-spaced grid in t;
// at each midpoint prefix and suffix count distributions (truncated at k)
// give every item's leave-one-out probability in O(E k). Accurate to ~1e-4.
std::vector<double> InclusionProbabilities(const std::vector<double>& w, int k) {
  const int n = static_cast<int>(w.size());
  std::vector<double> pi(n, 0.0);
  if (k >= n) return std::vector<double>(n, 1.0);
  double w_max = 0, w_min = 1;
  for (double x : w) {
    w_max = std::max(w_max, x);
    if (x > 0) w_min = std::min(w_min, x);
  }
  constexpr int kGrid = 600;
  const double t_lo = 1e-4 / w_max, t_hi = 60 / w_min;
  const double step = std::log(t_hi / t_lo) / kGrid;
  std::vector<double> pre(static_cast<size_t>(n + 1) * k), suf(static_cast<size_t>(n + 2) * k);
  std::vector<double> q(n);
  for (int i = 0; i < n; ++i) pi[i] = -std::expm1(-w[i] * t_lo);  // [0, t_lo): nobody else yet
  for (int g = 0; g < kGrid; ++g) {
    const double a = t_lo * std::exp(step * g), b = t_lo * std::exp(step * (g + 1));
    const double t = std::sqrt(a * b);
    for (int j = 0; j < n; ++j) q[j] = -std::expm1(-w[j] * t);
    // pre[j]: count distribution of items < j; suf[j]: cumulative P(count of
    // items >= j <= c).
    std::fill(pre.begin(), pre.begin() + k, 0.0);
    pre[0] = 1;
    for (int j = 0; j < n; ++j) {
      const double* from = &pre[static_cast<size_t>(j) * k];
      double* to = &pre[static_cast<size_t>(j + 1) * k];
      to[0] = from[0] * (1 - q[j]);
      for (int c = 1; c < k; ++c) to[c] = from[c] * (1 - q[j]) + from[c - 1] * q[j];
    }
    std::vector<double> dist(k, 0.0), next(k);
    dist[0] = 1;
    for (int j = n; j >= 1; --j) {
      double* cum = &suf[static_cast<size_t>(j) * k];
      double run = 0;
      for (int c = 0; c < k; ++c) cum[c] = run += dist[c];
      next[0] = dist[0] * (1 - q[j - 1]);
      for (int c = 1; c < k; ++c) next[c] = dist[c] * (1 - q[j - 1]) + dist[c - 1] * q[j - 1];
      dist.swap(next);
    }
    for (int i = 0; i < n; ++i) {
      const double* p = &pre[static_cast<size_t>(i) * k];
      const double* cum = &suf[static_cast<size_t>(i + 1) * k];
      double fewer = 0;  // P(fewer than k others before t)
      for (int c = 0; c < k; ++c) fewer += p[c] * cum[k - 1 - c];
      pi[i] += fewer * (std::exp(-w[i] * a) - std::exp(-w[i] * b));
    }
  }
  double sum = 0;
  for (double x : pi) sum += x;
  for (double& x : pi) x = std::min(1.0, x * k / sum);
  return pi;
}

}  // namespace

void RoutingModel::Alias::Build(const std::vector<double>& weights) {
  const int n = static_cast<int>(weights.size());
  double sum = 0;
  for (double w : weights) sum += w;
  prob.assign(n, 1.0);
  alias.assign(n, 0);
  std::vector<double> scaled(n);
  std::vector<int> small, large;
  for (int i = 0; i < n; ++i) {
    scaled[i] = sum > 0 ? weights[i] * n / sum : 1.0;
    (scaled[i] < 1.0 ? small : large).push_back(i);
    alias[i] = i;
  }
  while (!small.empty() && !large.empty()) {
    const int s = small.back(), l = large.back();
    small.pop_back();
    prob[s] = scaled[s];
    alias[s] = l;
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  for (int i : small) prob[i] = 1.0;  // rounding leftovers
  for (int i : large) prob[i] = 1.0;
}

int RoutingModel::Alias::Draw(uint64_t bits) const {
  const int i = UniformIndex(bits, static_cast<int>(prob.size()));
  const double u = static_cast<double>(bits & 0xFFFFFFFFull) * (1.0 / 4294967296.0);
  return u < prob[i] ? i : alias[i];
}

Result<RoutingModel> RoutingModel::Create(int layers, int experts, int top_k,
                                          const RoutingModelOptions& options) {
  if (layers < 1)
    return InvalidArgument("routing model: layers must be >= 1, got " + std::to_string(layers));
  if (experts < 1)
    return InvalidArgument("routing model: experts must be >= 1, got " + std::to_string(experts));
  if (top_k < 1 || top_k > experts) {
    return InvalidArgument("routing model: top_k must be in [1, experts=" +
                           std::to_string(experts) + "], got " + std::to_string(top_k));
  }
  if (!std::isfinite(options.skew) || options.skew < 0) {
    return InvalidArgument("routing model: skew must be finite and >= 0, got " +
                           std::to_string(options.skew));
  }
  if (!std::isfinite(options.drift_period_s) || options.drift_period_s < 0) {
    return InvalidArgument("routing model: drift_period_s must be finite and >= 0, got " +
                           std::to_string(options.drift_period_s));
  }
  if (!(options.drift_fraction >= 0 && options.drift_fraction <= 1)) {
    return InvalidArgument("routing model: drift_fraction must be in [0, 1], got " +
                           std::to_string(options.drift_fraction));
  }
  return RoutingModel(layers, experts, top_k, options);
}

RoutingModel::RoutingModel(int layers, int experts, int top_k, const RoutingModelOptions& options)
    : layers_(layers),
      experts_(experts),
      top_k_(top_k),
      options_(options),
      rank_(layers, std::vector<int>(experts)),
      expert_of_rank_(layers, std::vector<int>(experts)),
      weight_(experts),
      inclusion_(experts),
      chosen_(top_k),
      rng_(SplitMix(options.seed)) {
  // Popularity by rank: 1 / (rank + 1)^skew, normalised (log space keeps
  // large skews finite).
  double sum = 0;
  for (int r = 0; r < experts; ++r) {
    weight_[r] = std::exp(-options.skew * std::log(r + 1.0));
    sum += weight_[r];
  }
  for (double& w : weight_) w /= sum;
  inclusion_ = InclusionProbabilities(weight_, top_k);
  by_weight_.Build(weight_);
  by_inclusion_.Build(inclusion_);
  // The ranking of each layer at t = 0: a permutation fixed by (seed, layer).
  for (int l = 0; l < layers; ++l) {
    std::vector<int>& order = expert_of_rank_[l];
    for (int e = 0; e < experts; ++e) order[e] = e;
    uint64_t state = SplitMix(options.seed ^ SplitMix(0x5EED0000ull + l));
    for (int i = experts - 1; i > 0; --i) {
      state = SplitMix(state);
      std::swap(order[i], order[UniformIndex(state, i + 1)]);
    }
    for (int r = 0; r < experts; ++r) rank_[l][order[r]] = r;
  }
  (void)NormalTable();  // built once per process, not in the first step
}

void RoutingModel::ApplyDrift(int64_t n) {
  const int pairs =
      options_.drift_fraction <= 0
          ? 0
          : std::clamp(static_cast<int>(std::llround(options_.drift_fraction * experts_ / 2)), 1,
                       experts_ / 2);
  if (pairs == 0) return;
  uint64_t state = SplitMix(options_.seed ^ SplitMix(0xD71F7000ull + static_cast<uint64_t>(n)));
  std::vector<int> pick(experts_);
  for (int l = 0; l < layers_; ++l) {
    for (int e = 0; e < experts_; ++e) pick[e] = e;
    // 2 * pairs distinct experts (partial Fisher-Yates), swapped pairwise.
    for (int i = 0; i < 2 * pairs; ++i) {
      state = SplitMix(state);
      std::swap(pick[i], pick[i + UniformIndex(state, experts_ - i)]);
    }
    for (int i = 0; i < pairs; ++i) {
      const int a = pick[2 * i], b = pick[2 * i + 1];
      std::swap(rank_[l][a], rank_[l][b]);
      expert_of_rank_[l][rank_[l][a]] = a;
      expert_of_rank_[l][rank_[l][b]] = b;
    }
  }
}

void RoutingModel::DriftTo(int64_t t_us) {
  if (options_.drift_period_s <= 0 || options_.drift_fraction <= 0 || t_us <= 0) return;
  const int64_t n = static_cast<int64_t>(std::floor(t_us / (options_.drift_period_s * 1e6)));
  while (drifts_applied_ < n) ApplyDrift(++drifts_applied_);
}

double RoutingModel::Normal() {
  // Five 12-bit table indices per 64-bit draw.
  if (spare_draws_ == 0) {
    spare_bits_ = rng_();
    spare_draws_ = 64 / kNormalBits;
  }
  --spare_draws_;
  const uint64_t index = spare_bits_ & ((1u << kNormalBits) - 1);
  spare_bits_ >>= kNormalBits;
  return NormalTable()[index];
}

void RoutingModel::Sample(int layer, int64_t tokens, int64_t t_us, std::vector<int64_t>* counts) {
  assert(layer >= 0 && layer < layers_ && tokens >= 0);
  DriftTo(t_us);
  counts->assign(experts_, 0);
  if (tokens == 0) return;
  if (tokens * top_k_ <= static_cast<int64_t>(kExactRowsPerExpert) * experts_) {
    SampleExact(layer, tokens, counts);
  } else {
    SampleApprox(layer, tokens, counts);
  }
}

// Each token: top_k distinct ranks drawn in turn from the popularity of the
// ranks not yet picked (rejection of repeats; a linear draw over the rest
// after many rejections, which only very large skews reach).
void RoutingModel::SampleExact(int layer, int64_t tokens, std::vector<int64_t>* counts) {
  const std::vector<int>& expert = expert_of_rank_[layer];
  for (int64_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < top_k_; ++j) {
      int r = -1;
      for (int tries = 0; tries < 64 && r < 0; ++tries) {
        const int c = by_weight_.Draw(rng_());
        if (std::find(chosen_.begin(), chosen_.begin() + j, c) == chosen_.begin() + j) r = c;
      }
      if (r < 0) {
        double rest = 0;
        for (int q = 0; q < experts_; ++q) {
          if (std::find(chosen_.begin(), chosen_.begin() + j, q) == chosen_.begin() + j) {
            rest += weight_[q];
          }
        }
        double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * rest;
        for (int q = 0; q < experts_; ++q) {
          if (std::find(chosen_.begin(), chosen_.begin() + j, q) != chosen_.begin() + j) continue;
          r = q;  // the last free rank absorbs rounding (and an all-zero rest)
          u -= weight_[q];
          if (u < 0) break;
        }
      }
      chosen_[j] = r;
      (*counts)[expert[r]] += 1;
    }
  }
}

// counts[e] is Binomial(tokens, pi_e) in the exact draw (a token picks e at
// most once); this draws each from its normal approximation, rounded and
// clamped to [0, tokens], then restores the sum tokens * top_k by adding or
// removing rows one at a time at ranks drawn by inclusion probability.
void RoutingModel::SampleApprox(int layer, int64_t tokens, std::vector<int64_t>* counts) {
  const std::vector<int>& expert = expert_of_rank_[layer];
  if (tokens != approx_tokens_) {  // every layer of a step samples the same token count
    approx_tokens_ = tokens;
    const double n = static_cast<double>(tokens);
    approx_mean_.resize(experts_);
    approx_sd_.resize(experts_);
    for (int r = 0; r < experts_; ++r) {
      const double pi = inclusion_[r];
      approx_mean_[r] = n * pi + 0.5;  // + 0.5: rounds by truncation below
      approx_sd_[r] = std::sqrt(n * pi * (1 - pi));
    }
  }
  int64_t sum = 0;
  int64_t* out = counts->data();
  for (int r = 0; r < experts_; ++r) {
    const double x = approx_mean_[r] + approx_sd_[r] * Normal();
    const int64_t c = x <= 0 ? 0 : std::min<int64_t>(static_cast<int64_t>(x), tokens);
    out[expert[r]] = c;
    sum += c;
  }
  int64_t diff = tokens * top_k_ - sum;
  if (diff > experts_ || diff < -experts_) {
    // Most of a large correction in one pass, in proportion to pi (the
    // loop below then moves fewer than `experts` rows).
    const int64_t want = diff;
    for (int r = 0; r < experts_; ++r) {
      int64_t& c = out[expert[r]];
      const int64_t step = std::clamp<int64_t>(
          static_cast<int64_t>(static_cast<double>(want) * inclusion_[r] / top_k_), -c, tokens - c);
      c += step;
      diff -= step;
    }
  }
  int misses = 0;
  while (diff != 0) {
    const int r = by_inclusion_.Draw(rng_());
    int64_t& c = (*counts)[expert[r]];
    if (diff > 0 && c < tokens) {
      ++c;
      --diff;
      misses = 0;
    } else if (diff < 0 && c > 0) {
      --c;
      ++diff;
      misses = 0;
    } else if (++misses > 64) {
      // Every drawn rank is at its bound: settle the rest deterministically.
      for (int q = 0; q < experts_ && diff != 0; ++q) {
        int64_t& cq = (*counts)[expert[q]];
        const int64_t step = diff > 0 ? std::min(diff, tokens - cq) : std::max(diff, -cq);
        cq += step;
        diff -= step;
      }
    }
  }
}

std::vector<double> RoutingModel::Popularity(int layer) const {
  std::vector<double> p(experts_);
  for (int e = 0; e < experts_; ++e) p[e] = weight_[rank_[layer][e]];
  return p;
}

std::vector<double> RoutingModel::Inclusion(int layer) const {
  std::vector<double> p(experts_);
  for (int e = 0; e < experts_; ++e) p[e] = inclusion_[rank_[layer][e]];
  return p;
}

}  // namespace sy::engine
