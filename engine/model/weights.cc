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

namespace {

MlaWeights BuildMla(const ModelConfig& c, uint64_t seed, const std::string& p) {
  const size_t h = c.hidden, heads = c.heads;
  const size_t qk = heads * c.mla_qk_head_dim();
  const size_t r = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  MlaWeights m;
  if (c.q_lora_rank > 0) {
    const size_t ql = c.q_lora_rank;
    m.q_a = Tensor(seed, p + ".q_a", h * ql, InitScale(c.hidden));
    m.q_a_norm = Tensor(seed, p + ".q_a_norm", ql, 0.1f, 1.0f);
    m.q_b = Tensor(seed, p + ".q_b", ql * qk, InitScale(c.q_lora_rank));
  } else {
    m.q_b = Tensor(seed, p + ".q_b", h * qk, InitScale(c.hidden));
  }
  m.kv_a = Tensor(seed, p + ".kv_a", h * (r + rope), InitScale(c.hidden));
  m.kv_a_norm = Tensor(seed, p + ".kv_a_norm", r, 0.1f, 1.0f);
  m.kv_b = Tensor(seed, p + ".kv_b", r * heads * (c.qk_nope_head_dim + c.v_head_dim),
                  InitScale(c.kv_lora_rank));
  if (c.mla_gate) m.gate = Tensor(seed, p + ".gate", h * heads, InitScale(c.hidden));
  m.o = Tensor(seed, p + ".o", heads * c.v_head_dim * h, InitScale(c.heads * c.v_head_dim));
  return m;
}

LinearAttnWeights BuildLinear(const ModelConfig& c, uint64_t seed, const std::string& p, bool kda) {
  const size_t h = c.hidden, heads = c.heads, d = c.linear_head_dim, dd = heads * d;
  LinearAttnWeights a;
  a.q = Tensor(seed, p + ".q", h * dd, InitScale(c.hidden));
  a.k = Tensor(seed, p + ".k", h * dd, InitScale(c.hidden));
  a.v = Tensor(seed, p + ".v", h * dd, InitScale(c.hidden));
  if (kda) {
    // Depthwise kernels summing to about 1 keep the conv output at input scale.
    const size_t kw = c.conv_kernel;
    a.conv = Tensor(seed, p + ".conv", 3 * dd * kw, 0.5f / static_cast<float>(kw),
                    1.0f / static_cast<float>(kw));
    a.b = Tensor(seed, p + ".b", h * heads, InitScale(c.hidden));
  }
  a.f = Tensor(seed, p + ".f", h * dd, InitScale(c.hidden));
  // exp(A_log) in [0.37, 2.7] and dt_bias around -2 give per-token decays
  // from about 0.3 to 0.99: some channels forget fast, some remember long.
  a.a_log = Tensor(seed, p + ".a_log", heads, 1.0f);
  a.dt_bias = Tensor(seed, p + ".dt_bias", dd, 1.0f, -2.0f);
  a.g = Tensor(seed, p + ".g", h * dd, InitScale(c.hidden));
  a.o_norm = Tensor(seed, p + ".o_norm", d, 0.1f, 1.0f);
  a.o = Tensor(seed, p + ".o", dd * h, InitScale(static_cast<int>(dd)));
  return a;
}

}  // namespace

ModelWeights BuildWeights(const ModelConfig& c, uint64_t seed,
                          const std::vector<int>& local_experts) {
  assert(c.Validate().ok());
  const size_t h = c.hidden;
  ModelWeights w;
  w.embed = Tensor(seed, "embed", c.vocab * h, 1.0f);
  w.layers.resize(c.layers);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    LayerWeights& lw = w.layers[l];
    // Gains near 1 (not exactly 1) so a test would notice a gain left unapplied.
    lw.attn_norm = Tensor(seed, p + ".attn_norm", h, 0.1f, 1.0f);
    switch (c.attention(l)) {
      case AttentionKind::kMha: {
        const size_t q = static_cast<size_t>(c.heads) * c.head_dim;
        const size_t kv = static_cast<size_t>(c.kv_heads) * c.head_dim;
        lw.wqkv = Tensor(seed, p + ".wqkv", h * (q + 2 * kv), InitScale(c.hidden));
        lw.wo = Tensor(seed, p + ".wo", q * h, InitScale(static_cast<int>(q)));
        break;
      }
      case AttentionKind::kMla:
        lw.mla = BuildMla(c, seed, p + ".mla");
        break;
      case AttentionKind::kKda:
      case AttentionKind::kGla:
        lw.linear = BuildLinear(c, seed, p + ".linear", c.attention(l) == AttentionKind::kKda);
        break;
    }
    lw.ffn_norm = Tensor(seed, p + ".ffn_norm", h, 0.1f, 1.0f);
    if (!c.is_moe(l)) {
      lw.dense = Swiglu(seed, p + ".dense", c.hidden, c.dense_inter);
      continue;
    }
    lw.router = Tensor(seed, p + ".router", h * c.experts, InitScale(c.hidden));
    if (c.router == RouterKind::kSigmoidGrouped) {
      lw.expert_bias = Tensor(seed, p + ".expert_bias", c.experts, 0.05f);
    }
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
