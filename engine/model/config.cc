#include "engine/model/config.h"

#include <cmath>

namespace sy::engine {

namespace {

ModelConfig Tiny() {
  ModelConfig tiny;  // the struct defaults are the tiny model
  tiny.name = "tiny";
  return tiny;
}

// A heavier foundation model for benchmarks: twice the width and depth, 32 experts top-4.
ModelConfig Small() {
  ModelConfig small;
  small.name = "small";
  small.hidden = 512;
  small.layers = 8;
  small.heads = 8;
  small.kv_heads = 8;
  small.head_dim = 64;
  small.experts = 32;
  small.top_k = 4;
  small.expert_inter = 256;
  small.shared_inter = 512;
  small.max_seq = 2048;
  return small;
}

// The bailing_hybrid fields every hybrid preset shares (seed 001 §1.1).
ModelConfig HybridBase() {
  ModelConfig c;
  c.arch = std::string(kArchBailingHybrid);
  c.kv_heads = 0;
  c.head_dim = 0;
  c.layer_group_size = 4;
  c.linear_kind = AttentionKind::kKda;
  c.mla_gate = true;
  c.rope_interleave = true;
  c.conv_kernel = 4;
  c.kda_has_lower_bound = true;
  c.kda_lower_bound = -5.0f;
  c.first_k_dense_replace = 1;
  c.router = RouterKind::kSigmoidGrouped;
  c.routed_scaling_factor = 2.5f;
  c.norm_topk_prob = true;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-6f;
  return c;
}

// Ling3-Tiny at its real dimensions (seed 001 §1.1). Fields the seed does not
// list (vocab, intermediate sizes) are those of the public Ling-3.0-tiny
// config.json: vocab_size 157184, intermediate_size 4608,
// moe_intermediate_size 512, moe_shared_expert_intermediate_size 512.
ModelConfig Ling3Tiny() {
  ModelConfig c = HybridBase();
  c.name = "ling3-tiny";
  c.vocab = 157184;
  c.hidden = 1536;
  c.layers = 24;
  c.heads = 16;
  c.max_seq = 8192;
  c.eos_token = 156892;
  c.mtp_layers = 1;
  c.q_lora_rank = 256;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  c.linear_head_dim = 128;
  c.dense_inter = 4608;
  c.experts = 128;
  c.top_k = 8;
  c.expert_inter = 512;
  c.shared_inter = 512;
  c.n_group = 8;
  c.topk_group = 4;
  return c;
}

// Ling3-Tiny's structure scaled down to run on 2 cores: 8 layers (KDA x3, MLA)
// x 2, dense layer 0, 16 experts in 4 groups, byte-level vocabulary.
ModelConfig TinyHybrid() {
  ModelConfig c = HybridBase();
  c.name = "tiny-hybrid";
  c.vocab = 260;
  c.hidden = 256;
  c.layers = 8;
  c.heads = 4;
  c.max_seq = 2048;
  c.eos_token = 257;
  c.q_lora_rank = 96;
  c.kv_lora_rank = 128;
  c.qk_nope_head_dim = 64;
  c.qk_rope_head_dim = 32;
  c.v_head_dim = 64;
  c.linear_head_dim = 64;
  c.dense_inter = 512;
  c.experts = 16;
  c.top_k = 4;
  c.expert_inter = 128;
  c.shared_inter = 128;
  c.n_group = 4;
  c.topk_group = 2;
  return c;
}

// Ling-2.6-style (seed 000): GLA linear attention with one MLA layer in 8
// (Ling-2.6-1T has 70 GLA + 10 MLA layers), scaled down like tiny-hybrid.
ModelConfig TinyGla() {
  ModelConfig c = TinyHybrid();
  c.name = "tiny-gla";
  c.linear_kind = AttentionKind::kGla;
  c.layer_group_size = 8;
  c.conv_kernel = 0;
  c.kda_has_lower_bound = false;
  return c;
}

// Returns the known presets in display order. Built on each call: presets are
// plain values and this keeps the library free of global mutable state.
std::vector<ModelConfig> Presets() {
  return {Tiny(), Small(), TinyHybrid(), TinyGla(), Ling3Tiny()};
}

Status FieldError(const char* field, const std::string& why) {
  return InvalidArgument(std::string("model config field '") + field + "' " + why);
}

Status Positive(const char* field, int v) {
  if (v < 1) return FieldError(field, "must be >= 1, got " + std::to_string(v));
  return Status::Ok();
}

Status ValidateMha(const ModelConfig& c) {
  RETURN_IF_ERROR(Positive("kv_heads", c.kv_heads));
  if (c.heads % c.kv_heads != 0) {
    return FieldError("kv_heads", "must divide heads (" + std::to_string(c.heads) + "), got " +
                                      std::to_string(c.kv_heads));
  }
  RETURN_IF_ERROR(Positive("head_dim", c.head_dim));
  if (c.head_dim % 2 != 0) {
    return FieldError("head_dim", "must be even for RoPE, got " + std::to_string(c.head_dim));
  }
  if (c.router != RouterKind::kSoftmax) {
    return FieldError("router", "must be softmax for arch 'moe'");
  }
  return Status::Ok();
}

Status ValidateHybrid(const ModelConfig& c) {
  RETURN_IF_ERROR(Positive("layer_group_size", c.layer_group_size));
  if (c.linear_kind != AttentionKind::kKda && c.linear_kind != AttentionKind::kGla) {
    return FieldError("linear_kind", "must be kda or gla");
  }
  if (c.q_lora_rank < 0) {
    return FieldError("q_lora_rank",
                      "must be >= 0 (0: no Q-LoRA), got " + std::to_string(c.q_lora_rank));
  }
  RETURN_IF_ERROR(Positive("kv_lora_rank", c.kv_lora_rank));
  RETURN_IF_ERROR(Positive("qk_nope_head_dim", c.qk_nope_head_dim));
  RETURN_IF_ERROR(Positive("qk_rope_head_dim", c.qk_rope_head_dim));
  if (c.qk_rope_head_dim % 2 != 0) {
    return FieldError("qk_rope_head_dim",
                      "must be even for RoPE, got " + std::to_string(c.qk_rope_head_dim));
  }
  RETURN_IF_ERROR(Positive("v_head_dim", c.v_head_dim));
  RETURN_IF_ERROR(Positive("linear_head_dim", c.linear_head_dim));
  if (c.linear_kind == AttentionKind::kKda) {
    RETURN_IF_ERROR(Positive("conv_kernel", c.conv_kernel));
    if (c.kda_has_lower_bound && !(std::isfinite(c.kda_lower_bound) && c.kda_lower_bound < 0)) {
      return FieldError("kda_lower_bound", "must be a finite negative number, got " +
                                               std::to_string(c.kda_lower_bound));
    }
  }
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.layers) {
    return FieldError("first_k_dense_replace", "must be in [0, layers=" + std::to_string(c.layers) +
                                                   "], got " +
                                                   std::to_string(c.first_k_dense_replace));
  }
  if (c.first_k_dense_replace > 0) RETURN_IF_ERROR(Positive("dense_inter", c.dense_inter));
  if (c.mtp_layers < 0) return FieldError("mtp_layers", "must be >= 0");
  if (c.router == RouterKind::kSigmoidGrouped) {
    RETURN_IF_ERROR(Positive("n_group", c.n_group));
    if (c.experts % c.n_group != 0) {
      return FieldError("n_group", "must divide experts (" + std::to_string(c.experts) + "), got " +
                                       std::to_string(c.n_group));
    }
    if (c.topk_group < 1 || c.topk_group > c.n_group) {
      return FieldError("topk_group", "must be in [1, n_group=" + std::to_string(c.n_group) +
                                          "], got " + std::to_string(c.topk_group));
    }
    const int per_group = c.experts / c.n_group;
    if (per_group < 2 && c.n_group > 1) {
      return FieldError("n_group",
                        "leaves fewer than 2 experts per group (group scores sum "
                        "each group's two highest)");
    }
    if (c.top_k > c.topk_group * per_group) {
      return FieldError("top_k", "exceeds the experts in topk_group kept groups (" +
                                     std::to_string(c.topk_group * per_group) + ")");
    }
  }
  if (!(std::isfinite(c.routed_scaling_factor) && c.routed_scaling_factor > 0)) {
    return FieldError("routed_scaling_factor", "must be a finite number > 0");
  }
  return Status::Ok();
}

}  // namespace

std::string_view AttentionKindName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMha:
      return "mha";
    case AttentionKind::kMla:
      return "mla";
    case AttentionKind::kKda:
      return "kda";
    case AttentionKind::kGla:
      return "gla";
  }
  return "?";
}

bool ModelConfig::is_full_attention(int layer) const {
  if (!hybrid()) return true;
  // A trailing partial group is all full attention (as in the reference
  // implementations of bailing_hybrid); with layers a multiple of the group
  // size this is exactly "every group's last layer".
  const int whole = layers / layer_group_size * layer_group_size;
  return (layer + 1) % layer_group_size == 0 || layer >= whole;
}

AttentionKind ModelConfig::attention(int layer) const {
  if (!hybrid()) return AttentionKind::kMha;
  return is_full_attention(layer) ? AttentionKind::kMla : linear_kind;
}

int ModelConfig::full_attention_layers() const {
  int n = 0;
  for (int l = 0; l < layers; ++l) n += is_full_attention(l) ? 1 : 0;
  return n;
}

int ModelConfig::linear_layers() const { return layers - full_attention_layers(); }

int ModelConfig::kv_layer(int layer) const {
  if (!is_full_attention(layer)) return -1;
  int n = 0;
  for (int l = 0; l < layer; ++l) n += is_full_attention(l) ? 1 : 0;
  return n;
}

int ModelConfig::state_layer(int layer) const {
  if (is_full_attention(layer)) return -1;
  int n = 0;
  for (int l = 0; l < layer; ++l) n += is_full_attention(l) ? 0 : 1;
  return n;
}

int ModelConfig::kv_floats_per_token_layer() const {
  return hybrid() ? mla_latent_dim() : 2 * kv_heads * head_dim;
}

int64_t ModelConfig::conv_state_floats() const {
  if (!hybrid() || linear_kind != AttentionKind::kKda || conv_kernel < 2) return 0;
  return static_cast<int64_t>(conv_kernel - 1) * 3 * heads * linear_head_dim;
}

int64_t ModelConfig::state_floats_per_layer() const {
  if (!hybrid()) return 0;
  const int64_t d = linear_head_dim;
  return static_cast<int64_t>(heads) * d * d + conv_state_floats();
}

int64_t ModelConfig::ParamCount() const {
  const int64_t h = hidden;
  int64_t total = static_cast<int64_t>(vocab) * h * 2 + h;  // embed, lm_head, final norm
  for (int l = 0; l < layers; ++l) {
    int64_t p = 2 * h;  // attn + ffn RMSNorm gains
    switch (attention(l)) {
      case AttentionKind::kMha: {
        const int64_t q = static_cast<int64_t>(heads) * head_dim;
        const int64_t kv = static_cast<int64_t>(kv_heads) * head_dim;
        p += h * (q + 2 * kv) + q * h;
        break;
      }
      case AttentionKind::kMla: {
        const int64_t qk = static_cast<int64_t>(heads) * mla_qk_head_dim();
        p += q_lora_rank > 0 ? h * q_lora_rank + q_lora_rank + q_lora_rank * qk : h * qk;
        p += h * mla_latent_dim() + kv_lora_rank;
        p += static_cast<int64_t>(kv_lora_rank) * heads * (qk_nope_head_dim + v_head_dim);
        p += mla_gate ? h * heads : 0;
        p += static_cast<int64_t>(heads) * v_head_dim * h;
        break;
      }
      case AttentionKind::kKda:
      case AttentionKind::kGla: {
        const int64_t d = static_cast<int64_t>(heads) * linear_head_dim;
        p += 5 * h * d + d * h;            // q, k, v, f, g; o
        p += heads + d + linear_head_dim;  // A_log, dt_bias, o_norm
        if (attention(l) == AttentionKind::kKda) p += h * heads + 3 * d * conv_kernel;
        break;
      }
    }
    if (is_moe(l)) {
      p += h * experts + (router == RouterKind::kSigmoidGrouped ? experts : 0);
      p += static_cast<int64_t>(experts) * 3 * h * expert_inter + 3 * h * shared_inter;
    } else {
      p += 3 * h * dense_inter;
    }
    total += p;
  }
  return total;
}

Status ModelConfig::Validate() const {
  if (arch != kArchMoe && arch != kArchBailingHybrid) {
    return FieldError("arch",
                      "must be 'moe' or 'bailing_hybrid', got '" + arch.substr(0, 64) + "'");
  }
  RETURN_IF_ERROR(Positive("vocab", vocab));
  RETURN_IF_ERROR(Positive("hidden", hidden));
  RETURN_IF_ERROR(Positive("layers", layers));
  RETURN_IF_ERROR(Positive("heads", heads));
  if (hybrid() != (arch == kArchBailingHybrid)) {
    return FieldError("layer_group_size", "must be > 0 exactly when arch is bailing_hybrid");
  }
  RETURN_IF_ERROR(hybrid() ? ValidateHybrid(*this) : ValidateMha(*this));
  RETURN_IF_ERROR(Positive("experts", experts));
  if (top_k < 1 || top_k > experts) {
    return FieldError("top_k", "must be in [1, experts=" + std::to_string(experts) + "], got " +
                                   std::to_string(top_k));
  }
  RETURN_IF_ERROR(Positive("expert_inter", expert_inter));
  if (shared_inter < 0) {
    return FieldError("shared_inter", "must be >= 0, got " + std::to_string(shared_inter));
  }
  RETURN_IF_ERROR(Positive("max_seq", max_seq));
  if (eos_token < 0 || eos_token >= vocab) {
    return FieldError("eos_token", "must be in [0, vocab=" + std::to_string(vocab) + "), got " +
                                       std::to_string(eos_token));
  }
  if (!(std::isfinite(rope_theta) && rope_theta > 1.0f)) {
    return FieldError("rope_theta",
                      "must be a finite number > 1, got " + std::to_string(rope_theta));
  }
  if (!(std::isfinite(rms_eps) && rms_eps > 0.0f)) {
    return FieldError("rms_eps", "must be a finite number > 0, got " + std::to_string(rms_eps));
  }
  return Status::Ok();
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const ModelConfig& c : Presets()) names.push_back(c.name);
  return names;
}

Result<ModelConfig> PresetConfig(const std::string& name) {
  std::string known;
  for (const ModelConfig& c : Presets()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  return NotFound("unknown model preset '" + name.substr(0, 64) + "'; known presets: " + known);
}

}  // namespace sy::engine
