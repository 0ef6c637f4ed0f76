// File: engine/model/config.h
//
// ModelConfig: the shape of the model, and the named presets
// `moe-engine --model NAME` accepts. A config is a plain value; the weights it
// describes are built by model/weights.h from (config, seed) or loaded from a
// checkpoint (model_loader/). Two architectures share this struct:
//
//  * "moe" (the foundation model): every layer is multi-head attention (MHA,
//    rotate-half RoPE) followed by an MoE block with a softmax top-k router.
//  * "bailing_hybrid" (Ling3-Tiny, seed 001): layers come in groups of
//    `layer_group_size`; the last layer of each group (1-based layer index a
//    multiple of the group size) is MLA full attention and the others are
//    linear attention (KDA, or GLA for Ling-2.6-style presets). The first
//    `first_k_dense_replace` layers have a dense SwiGLU MLP, the rest an MoE
//    block with a sigmoid grouped top-k router, expert bias used only for
//    selection, routed scaling, and shared experts.
//
// Two different head dims exist in a hybrid model and must not be mixed up
// (seed 001 §3.2): `linear_head_dim` is the KDA/GLA q/k/v head dim and the
// recurrent state's side (128 in Ling3-Tiny); the MLA q/k dim is
// qk_nope_head_dim + qk_rope_head_dim (192), see mla_qk_head_dim().
//
// Layer indices in this API are 0-based. Full-attention layers own KV-pool
// layers (kv_layer()), linear layers own recurrent-state-pool layers
// (state_layer()); neither pool reserves anything for the other kind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sy::engine {

enum class AttentionKind { kMha, kMla, kKda, kGla };
enum class RouterKind { kSoftmax, kSigmoidGrouped };

// "mha" | "mla" | "kda" | "gla".
std::string_view AttentionKindName(AttentionKind kind);

inline constexpr std::string_view kArchMoe = "moe";
inline constexpr std::string_view kArchBailingHybrid = "bailing_hybrid";

struct ModelConfig {
  std::string name;          // preset name or the checkpoint directory's name
  std::string arch = "moe";  // kArchMoe | kArchBailingHybrid
  int vocab = 260;           // 256 bytes + BOS, EOS, PAD, UNK (model/tokenizer.h)
  int hidden = 256;
  int layers = 4;      // main decoder layers (MTP layers not counted)
  int heads = 4;       // attention heads of every attention kind
  int kv_heads = 4;    // MHA only: KV heads (GQA when < heads)
  int head_dim = 64;   // MHA only
  int max_seq = 1024;  // longest sequence (prompt + output) a request may reach
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;
  int32_t eos_token = 257;  // model/tokenizer.h kEosToken for the byte tokenizer

  // --- hybrid layer pattern (bailing_hybrid) ---
  int layer_group_size = 0;                         // 0: every layer is full attention (arch "moe")
  AttentionKind linear_kind = AttentionKind::kKda;  // kKda or kGla
  int mtp_layers = 0;  // num_nextn_predict_layers: in the checkpoint, never run

  // --- MLA (full-attention layers of bailing_hybrid) ---
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool mla_gate = true;         // head-wise sigmoid gate before o_proj (Ling3)
  bool rope_interleave = true;  // MLA RoPE on pairs (2i, 2i+1); MHA is always rotate-half

  // --- linear attention (KDA / GLA) ---
  int linear_head_dim = 0;  // q/k/v head dim; the state per head is [d x d]
  int conv_kernel = 4;      // KDA short causal conv width (short_conv_kernel_size)
  bool kda_has_lower_bound = true;
  float kda_lower_bound =
      -5.0f;  // kda_safe_gate: log-decay = lb * sigmoid(exp(A_log)(f + dt_bias))

  // --- FFN ---
  int first_k_dense_replace = 0;  // layers [0, k) use a dense SwiGLU MLP
  int dense_inter = 0;            // intermediate_size of the dense MLP
  int experts = 16;               // routed experts per MoE layer
  int top_k = 2;
  int expert_inter = 256;  // SwiGLU intermediate size of one routed expert
  int shared_inter = 256;  // total intermediate size of the shared expert(s) (0: none)
  RouterKind router = RouterKind::kSoftmax;
  int n_group = 1;     // sigmoid router: expert groups
  int topk_group = 1;  // sigmoid router: groups kept per token
  float routed_scaling_factor = 1.0f;
  bool norm_topk_prob = true;  // renormalise the top-k weights to sum 1

  bool hybrid() const { return layer_group_size > 0; }
  AttentionKind attention(int layer) const;
  bool is_full_attention(int layer) const;
  bool is_moe(int layer) const { return layer >= first_k_dense_replace; }
  int full_attention_layers() const;
  int linear_layers() const;
  // Index of `layer` among the full-attention (KV pool) layers, -1 for a linear layer.
  int kv_layer(int layer) const;
  // Index of `layer` among the linear (state pool) layers, -1 for a full-attention layer.
  int state_layer(int layer) const;
  int mla_qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // MLA: the compressed latent cached per token per layer (kv_lora_rank + rope dims).
  int mla_latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
  // Floats one token holds in one KV-pool layer: MHA 2 * kv_heads * head_dim; MLA the latent.
  int kv_floats_per_token_layer() const;
  // Floats of one linear layer's state in a recurrent slot: heads * d * d (the
  // recurrent state) + conv_state_floats().
  int64_t state_floats_per_layer() const;
  // KDA: the last conv_kernel - 1 pre-conv inputs of the q, k and v channels
  // (3 * heads * d each); GLA has no short conv (0).
  int64_t conv_state_floats() const;

  // Parameters in the whole model (all experts counted, MTP layers not).
  int64_t ParamCount() const;
  // INVALID_ARGUMENT naming the first field that is out of range or inconsistent.
  Status Validate() const;
};

// Names accepted by PresetConfig, in display order.
std::vector<std::string> PresetNames();
// NOT_FOUND (listing the known names) for an unknown preset.
Result<ModelConfig> PresetConfig(const std::string& name);

}  // namespace sy::engine
