#include "engine/model/config.h"

#include <cmath>

namespace sy::engine {

namespace {

// Returns the known presets in display order. Built on each call: presets are
// plain values and this keeps the library free of global mutable state.
std::vector<ModelConfig> Presets() {
  std::vector<ModelConfig> out;
  ModelConfig tiny;  // the struct defaults are the tiny model
  tiny.name = "tiny";
  out.push_back(tiny);

  // A heavier model for benchmarks: twice the width and depth, 32 experts top-4.
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
  out.push_back(small);
  return out;
}

Status FieldError(const char* field, const std::string& why) {
  return InvalidArgument(std::string("model config field '") + field + "' " + why);
}

}  // namespace

int64_t ModelConfig::ParamCount() const {
  const int64_t h = hidden;
  const int64_t q = static_cast<int64_t>(heads) * head_dim;
  const int64_t kv = static_cast<int64_t>(kv_heads) * head_dim;
  int64_t per_layer = 0;
  per_layer += 2 * h;                                                 // attn + ffn RMSNorm gains
  per_layer += h * (q + 2 * kv) + q * h;                              // qkv + output projection
  per_layer += h * experts;                                           // router
  per_layer += static_cast<int64_t>(experts) * 3 * h * expert_inter;  // routed SwiGLU experts
  per_layer += 3 * h * shared_inter;                                  // shared SwiGLU expert
  return static_cast<int64_t>(vocab) * h * 2 + h +
         per_layer * layers;  // embed, lm_head, final norm
}

Status ModelConfig::Validate() const {
  auto positive = [](const char* field, int v) -> Status {
    if (v < 1) return FieldError(field, "must be >= 1, got " + std::to_string(v));
    return Status::Ok();
  };
  RETURN_IF_ERROR(positive("vocab", vocab));
  RETURN_IF_ERROR(positive("hidden", hidden));
  RETURN_IF_ERROR(positive("layers", layers));
  RETURN_IF_ERROR(positive("heads", heads));
  RETURN_IF_ERROR(positive("kv_heads", kv_heads));
  if (heads % kv_heads != 0) {
    return FieldError("kv_heads", "must divide heads (" + std::to_string(heads) + "), got " +
                                      std::to_string(kv_heads));
  }
  RETURN_IF_ERROR(positive("head_dim", head_dim));
  if (head_dim % 2 != 0) {
    return FieldError("head_dim", "must be even for RoPE, got " + std::to_string(head_dim));
  }
  RETURN_IF_ERROR(positive("experts", experts));
  if (top_k < 1 || top_k > experts) {
    return FieldError("top_k", "must be in [1, experts=" + std::to_string(experts) + "], got " +
                                   std::to_string(top_k));
  }
  RETURN_IF_ERROR(positive("expert_inter", expert_inter));
  if (shared_inter < 0) {
    return FieldError("shared_inter", "must be >= 0, got " + std::to_string(shared_inter));
  }
  RETURN_IF_ERROR(positive("max_seq", max_seq));
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
