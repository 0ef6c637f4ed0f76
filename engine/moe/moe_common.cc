#include "engine/moe/moe_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/gemm.h"
#include "engine/model/layers.h"
#include "engine/moe/router.h"

namespace sy::engine {

MoeRouter::MoeRouter(const ModelConfig& config, RouterSkew skew) : config_(config), skew_(skew) {}

void MoeRouter::Route(int layer, const LayerWeights& w, const float* x, int tokens,
                      SpanRecorder* rec, int64_t* counts) {
  const int h = config_.hidden, e_count = config_.experts, top_k = config_.top_k;
  ids_.resize(static_cast<size_t>(tokens) * top_k);
  weights_.resize(ids_.size());
  if (tokens == 0) return;
  SpanRecorder::Scope span(
      rec, "router", layer, tokens, 2LL * tokens * h * e_count + 4LL * tokens * e_count,
      4LL * (static_cast<int64_t>(h) * e_count + static_cast<int64_t>(tokens) * h));
  logits_.resize(static_cast<size_t>(tokens) * e_count);
  Gemm(x, w.router.data(), logits_.data(), tokens, h, e_count);
  if (skew_.skew != 0.0) AddSkew(layer, tokens);
  if (config_.router == RouterKind::kSigmoidGrouped) {
    // routed_scaling_factor is applied here, inside the router, and nowhere else.
    const GroupedRouting r{.experts = e_count,
                           .top_k = top_k,
                           .n_group = config_.n_group,
                           .topk_group = config_.topk_group,
                           .renormalize = config_.norm_topk_prob,
                           .scaling = config_.routed_scaling_factor};
    RouteGroupedSigmoid(logits_.data(), w.expert_bias.data(), tokens, r, ids_.data(),
                        weights_.data());
  } else {
    RouteTopK(logits_.data(), tokens, e_count, top_k, config_.norm_topk_prob, ids_.data(),
              weights_.data());
  }
  if (counts != nullptr) {
    for (int32_t e : ids_) counts[e] += 1;
  }
}

void MoeRouter::AddSkew(int layer, int tokens) {
  const int e_count = config_.experts;
  const int64_t drift = skew_.drift_steps > 0 ? step_ / skew_.drift_steps : 0;
  // The hot order is a pseudo-random permutation per (layer, drift epoch):
  // experts sorted by a hash, so hot experts land on devices as chance has it
  // (a fixed stride would spread them evenly over a round-robin placement).
  skew_rank_.resize(e_count);
  for (int e = 0; e < e_count; ++e) skew_rank_[e] = e;
  const auto key = [&](int e) {
    uint64_t z = (static_cast<uint64_t>(layer) << 40) ^ (static_cast<uint64_t>(drift) << 16) ^
                 static_cast<uint64_t>(e);
    z += 0x9E3779B97F4A7C15ULL;  // splitmix64 finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  std::sort(skew_rank_.begin(), skew_rank_.end(), [&](int a, int b) { return key(a) < key(b); });
  skew_bias_.resize(e_count);
  for (int rank = 0; rank < e_count; ++rank) {
    skew_bias_[skew_rank_[rank]] =
        static_cast<float>(skew_.skew * std::log(1.0 / static_cast<double>(rank + 1)));
  }
  for (int t = 0; t < tokens; ++t) {
    float* lg = &logits_[static_cast<size_t>(t) * e_count];
    for (int e = 0; e < e_count; ++e) lg[e] += skew_bias_[e];
  }
}

void SwigluSlice(const float* x, int n, int hidden, const float* gate, const float* up, int ldb,
                 const float* down, int shard, std::vector<float>* scratch, float* y) {
  if (n == 0) return;
  const size_t cells = static_cast<size_t>(n) * shard;
  if (scratch->size() < 2 * cells) scratch->resize(2 * cells);
  float* g = scratch->data();
  float* u = g + cells;
  GemmStrided(x, hidden, gate, ldb, g, n, hidden, shard);
  GemmStrided(x, hidden, up, ldb, u, n, hidden, shard);
  // SiluMul's expression, on separate gate and up blocks.
  for (size_t i = 0; i < cells; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  GemmLda(g, shard, down, y, n, shard, hidden);
}

void SumSlices(float* y, const float* slice, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] += slice[i];
}

void CombineTopK(const ModelConfig& config, const LayerWeights& w, const float* x, int tokens,
                 const float* weighted, std::vector<float>* act, float* out, SpanRecorder* rec,
                 int layer) {
  if (tokens == 0) return;
  const int h = config.hidden, top_k = config.top_k;
  const int s_inter = w.shared.present() ? w.shared.inter : 0;
  SpanRecorder::Scope span(
      rec, "shared_expert", layer, tokens, 6LL * tokens * h * s_inter + 1LL * tokens * top_k * h,
      4LL * (3LL * h * s_inter + static_cast<int64_t>(tokens) * h * (top_k + 2)));
  // Fixed summation order (top-k rank) keeps the result independent of P and the layout.
  for (int t = 0; t < tokens; ++t) {
    float* o = out + static_cast<size_t>(t) * h;
    const float* r0 = weighted + static_cast<size_t>(t) * top_k * h;
    std::memcpy(o, r0, h * sizeof(float));
    for (int k = 1; k < top_k; ++k) {
      const float* rk = r0 + static_cast<size_t>(k) * h;
      for (int i = 0; i < h; ++i) o[i] += rk[i];
    }
  }
  if (s_inter > 0) {
    act->resize(std::max(act->size(), static_cast<size_t>(tokens) * 2 * s_inter));
    SwigluFfn(w.shared, x, tokens, act->data(), out, /*accumulate=*/true);
  }
}

}  // namespace sy::engine
