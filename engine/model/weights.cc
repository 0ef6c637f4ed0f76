#include "engine/model/weights.h"

#include <cassert>
#include <cmath>
#include <string>

namespace sy::engine {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

// FNV-1a of the tensor name, mixed with the seed: the tensor's stream key.
uint64_t TensorKey(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return SplitMix64(h ^ SplitMix64(seed));
}

// Uniform variance 1/fan_in: u in [-1,1) has variance 1/3.
float InitScale(int fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); }

std::vector<float> Tensor(uint64_t seed, const std::string& name, size_t n, float scale,
                          float offset = 0.0f) {
  std::vector<float> v(n);
  FillTensor(seed, name, scale, offset, v.data(), n);
  return v;
}

SwigluWeights Swiglu(uint64_t seed, const std::string& prefix, int hidden, int inter) {
  SwigluWeights w;
  w.in = hidden;
  w.inter = inter;
  w.gate_up =
      Tensor(seed, prefix + ".gate_up", static_cast<size_t>(hidden) * 2 * inter, InitScale(hidden));
  w.down = Tensor(seed, prefix + ".down", static_cast<size_t>(inter) * hidden, InitScale(inter));
  return w;
}

}  // namespace

void FillTensor(uint64_t seed, std::string_view name, float scale, float offset, float* out,
                size_t n) {
  const uint64_t key = TensorKey(seed, name);
  // 2^-23 maps the top 24 bits to [0, 2); minus 1 gives [-1, 1) exactly in fp32.
  constexpr float kUnit = 1.0f / 8388608.0f;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = SplitMix64(key + i);
    const float u = static_cast<float>(bits >> 40) * kUnit - 1.0f;
    out[i] = offset + scale * u;
  }
}

ModelWeights BuildWeights(const ModelConfig& c, uint64_t seed,
                          const std::vector<int>& local_experts) {
  assert(c.Validate().ok());
  const size_t h = c.hidden;
  const size_t q = static_cast<size_t>(c.heads) * c.head_dim;
  const size_t kv = static_cast<size_t>(c.kv_heads) * c.head_dim;
  ModelWeights w;
  w.embed = Tensor(seed, "embed", c.vocab * h, 1.0f);
  w.layers.resize(c.layers);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    LayerWeights& lw = w.layers[l];
    // Gains near 1 (not exactly 1) so a test would notice a gain left unapplied.
    lw.attn_norm = Tensor(seed, p + ".attn_norm", h, 0.1f, 1.0f);
    lw.wqkv = Tensor(seed, p + ".wqkv", h * (q + 2 * kv), InitScale(c.hidden));
    lw.wo = Tensor(seed, p + ".wo", q * h, InitScale(static_cast<int>(q)));
    lw.ffn_norm = Tensor(seed, p + ".ffn_norm", h, 0.1f, 1.0f);
    lw.router = Tensor(seed, p + ".router", h * c.experts, InitScale(c.hidden));
    lw.experts.resize(c.experts);
    for (int e : local_experts) {
      assert(e >= 0 && e < c.experts);
      lw.experts[e] = Swiglu(seed, p + ".experts." + std::to_string(e), c.hidden, c.expert_inter);
    }
    if (c.shared_inter > 0) lw.shared = Swiglu(seed, p + ".shared", c.hidden, c.shared_inter);
  }
  w.final_norm = Tensor(seed, "final_norm", h, 0.1f, 1.0f);
  w.lm_head = Tensor(seed, "lm_head", h * c.vocab, InitScale(c.hidden));
  return w;
}

}  // namespace sy::engine
