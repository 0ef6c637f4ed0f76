// File: engine/model/weights.h
//
// ModelWeights: the fp32 parameters of the model (either architecture of
// config.h), built deterministically from (config, seed) or loaded from a
// checkpoint (engine/model_loader/). Every built value is a pure function of
// (seed, tensor name, element index) through a counter-based generator
// (splitmix64), so each device builds exactly its own shard (the replicated
// tensors plus its local experts) without talking to anyone, and a model
// split over P devices holds the same numbers as the model on one device.
//
//   ModelWeights w = BuildWeights(config, /*seed=*/1, /*local_experts=*/{0, 4, 8, 12});
//
// Layout: every matrix is row-major [in x out], so y[T x out] = x[T x in] * W.
// Values are uniform with variance 1/fan_in, so activations keep unit scale.
//
// Thread-safety: BuildWeights is a pure function; the result is a value and
// is read-only while a model runs.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/model/config.h"

namespace sy::engine {

// One SwiGLU feed-forward block: down(silu(x Wg) * (x Wu)).
struct SwigluWeights {
  int in = 0;                  // model width H
  int inter = 0;               // intermediate size I; 0 means "not present on this device"
  std::vector<float> gate_up;  // [H x 2I]: columns [0, I) are the gate, [I, 2I) the up projection
  std::vector<float> down;     // [I x H]
  bool present() const { return inter > 0; }
};

// MLA full attention (seed 001 §3.3). Per head h, kv_b's columns
// [h*(N+V), h*(N+V)+N) are W_uk (latent -> k_nope) and the next V are W_uv.
struct MlaWeights {
  std::vector<float> q_a;        // [H x q_lora] (empty when q_lora_rank == 0)
  std::vector<float> q_a_norm;   // [q_lora]
  std::vector<float> q_b;        // [q_lora x heads*(N+P)], or [H x heads*(N+P)] without Q-LoRA
  std::vector<float> kv_a;       // [H x (R + P)]: compressed kv, then k_rope
  std::vector<float> kv_a_norm;  // [R]
  std::vector<float> kv_b;       // [R x heads*(N+V)]
  std::vector<float> gate;       // [H x heads] head-wise gate (empty when !mla_gate)
  std::vector<float> o;          // [heads*V x H]
};

// KDA / GLA linear attention (seed 001 §3.4, seed 000). d = linear_head_dim,
// D = heads * d. GLA has no short conv and no beta.
struct LinearAttnWeights {
  std::vector<float> q, k, v;  // [H x D] each
  std::vector<float> conv;     // [3D x K]: q channels, then k, then v (KDA)
  std::vector<float> f;        // [H x D] decay gate projection
  std::vector<float> b;        // [H x heads] beta projection (KDA)
  std::vector<float> a_log;    // [heads]
  std::vector<float> dt_bias;  // [D]
  std::vector<float> g;        // [H x D] output gate projection
  std::vector<float> o_norm;   // [d] gated RMSNorm gain
  std::vector<float> o;        // [D x H]
};

// One decoder layer. Only the members of the layer's kinds are filled:
// attention by config.attention(l) (MHA: wqkv/wo; MLA: mla; KDA/GLA: linear),
// FFN by config.is_moe(l) (MoE: router, experts, shared; dense: dense).
struct LayerWeights {
  std::vector<float> attn_norm;  // [H] RMSNorm gain before attention
  std::vector<float> wqkv;       // MHA: [H x (heads + 2 kv_heads) * head_dim]: q, k, v columns
  std::vector<float> wo;         // MHA: [heads * head_dim x H]
  MlaWeights mla;
  LinearAttnWeights linear;
  std::vector<float> ffn_norm;         // [H] RMSNorm gain before the FFN block
  SwigluWeights dense;                 // dense MLP (layers < first_k_dense_replace)
  std::vector<float> router;           // [H x experts]
  std::vector<float> expert_bias;      // [experts], sigmoid router only: selection bias
  std::vector<SwigluWeights> experts;  // [experts]; only local experts are present()
  SwigluWeights shared;                // the shared expert(s) (absent if shared_inter == 0)
};

struct ModelWeights {
  std::vector<float> embed;  // [vocab x H]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [H]
  std::vector<float> lm_head;     // [H x vocab] (untied from embed)
};

// Builds the replicated tensors and the routed experts listed in
// `local_experts` (ids in [0, config.experts)); all other experts stay empty.
// REQUIRES: config.Validate().ok().
ModelWeights BuildWeights(const ModelConfig& config, uint64_t seed,
                          const std::vector<int>& local_experts);

// The generator behind BuildWeights, exposed for tests and for tools that
// need one tensor alone: out[i] = scale * u(seed, name, i) with u uniform in
// [-1, 1), plus `offset`.
void FillTensor(uint64_t seed, std::string_view name, float scale, float offset, float* out,
                size_t n);

// splitmix64 finaliser: a bijective 64-bit mix, the core of every generator here.
uint64_t SplitMix64(uint64_t x);

}  // namespace sy::engine
