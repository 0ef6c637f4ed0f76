// File: engine/model/config.h
//
// ModelConfig: the shape of the decoder-only MoE transformer, and the named
// presets `moe-engine --model NAME` accepts. A config is a plain value; the
// weights it describes are built by model/weights.h from (config, seed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy::engine {

struct ModelConfig {
  std::string name;  // preset name, e.g. "tiny"
  int vocab = 260;   // 256 bytes + BOS, EOS, PAD, UNK (model/tokenizer.h)
  int hidden = 256;
  int layers = 4;
  int heads = 4;     // query heads
  int kv_heads = 4;  // == heads for now (no GQA in the foundation)
  int head_dim = 64;
  int experts = 16;  // routed experts per MoE layer
  int top_k = 2;
  int expert_inter = 256;  // SwiGLU intermediate size of one routed expert
  int shared_inter = 256;  // intermediate size of the shared expert (0: none)
  int max_seq = 1024;      // longest sequence (prompt + output) a request may reach
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;
  bool norm_topk_prob = true;  // renormalise the top-k softmax weights to sum 1

  // Parameters in the whole model (all experts counted).
  int64_t ParamCount() const;
  // INVALID_ARGUMENT naming the first field that is out of range or inconsistent.
  Status Validate() const;
};

// Names accepted by PresetConfig, in display order.
std::vector<std::string> PresetNames();
// NOT_FOUND (listing the known names) for an unknown preset.
Result<ModelConfig> PresetConfig(const std::string& name);

}  // namespace sy::engine
