// File: engine/model_loader/checkpoint.h
//
// A model directory: config.json + *.safetensors (+ an optional
// tokenizer.json, see model/bpe_tokenizer.h), with tensors named as in the
// Ling3 checkpoint (seed 001 §3.6). HF layout is [out, in]; ours is [in, out]
// (weights.h), so 2-D linear weights are transposed on load and on write.
//
// Names per layer i (prefix model.layers.{i}.):
//   input_layernorm.weight, post_attention_layernorm.weight
//   KDA/GLA attention.: q_proj k_proj v_proj f_proj g_proj o_proj .weight,
//        A_log [heads], dt_bias [D], o_norm.weight [d];
//        KDA also b_proj.weight, {q,k,v}_conv1d.weight [D, 1, K]
//   MLA attention.: q_a_proj q_a_layernorm q_b_proj (or q_proj without Q-LoRA)
//        kv_a_proj_with_mqa kv_a_layernorm kv_b_proj g_proj [heads, H] dense .weight
//   MHA attention. (switchyard_moe): q_proj k_proj v_proj o_proj .weight
//   dense MLP mlp.{gate,up,down}_proj.weight
//   MoE mlp.gate.weight, mlp.gate.expert_bias, mlp.experts.{e}.{gate,up,down}_proj.weight,
//       mlp.shared_experts.{gate,up,down}_proj.weight
// Global: model.word_embeddings.weight, model.norm.weight, lm_head.weight.
// attention.g_proj means two different things by layer type (KDA: the
// element-wise output gate [D, H]; MLA: the head-wise gate [heads, H]); the
// loader picks by config.attention(i). MTP layers (config.layers <= i <
// layers + mtp_layers) are never loaded: their keys with suffix eh_proj.*,
// enorm.*, hnorm.*, final_layernorm.*, input_layernorm.*,
// post_attention_layernorm.*, attention.* or mlp.* are the skip list
// (skipped() reports them); any other key there, or past them, is unmapped.
//
// Open validates the whole directory up front, so a device's Load cannot
// meet a surprise: every checkpoint key is mapped or on the MTP skip list
// (else FAILED_PRECONDITION listing the unmapped keys), every expected key is
// present (else NOT_FOUND listing the missing ones), and every shape matches
// (else INVALID_ARGUMENT naming file, tensor, expected and found shapes).
// Truncated files and bad headers fail in SafetensorsFile::Open (DATA_LOSS).
// The files read are those model.safetensors.index.json names (its
// weight_map must be right: a tensor it places in a file that lacks it, or a
// file name with a path in it, is DATA_LOSS), or without an index every
// *.safetensors in the directory; a tensor in two files is DATA_LOSS. The
// config comes from config.json (hf_config.h) and is named after the directory.
//
//   ASSIGN_OR_RETURN(auto ckpt, Checkpoint::Open("ckpt/"));
//   ModelWeights w = ckpt->Load(/*local_experts=*/{0, 4, 8, 12}).value();
//   Status s = WriteCheckpoint(config, BuildWeights(config, 1, all), "out/", DType::kF32);
//
// Thread-safety: after Open, Load is const and may run on P device threads at once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/model_loader/safetensors.h"

namespace sy::engine {

class Checkpoint {
 public:
  // NOT_FOUND for a missing directory, config.json or shard; see above for the rest.
  static Result<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  // The replicated tensors plus the routed experts in `local_experts`, laid out
  // exactly as BuildWeights lays them out (bf16/f16 widened to fp32); other
  // experts stay empty. INVALID_ARGUMENT for an id outside [0, experts).
  Result<ModelWeights> Load(const std::vector<int>& local_experts) const;
  // Keys skipped as MTP (for reporting).
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  Checkpoint() = default;
  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;  // every tensor of every file
  std::vector<std::string> skipped_;
};

// Writes config.json and the weights (every expert present) as
// model-0000k-of-0000n.safetensors shards of at most `shard_bytes` each (a
// larger tensor gets a shard to itself; one shard is still named
// model-00001-of-00001), plus model.safetensors.index.json ({"metadata":
// {"total_size": bytes}, "weight_map": {tensor: file}}), and MTP layers of
// random values when config.mtp_layers > 0 (so that loaders meet the skip
// rule; MLA attention for bailing_hybrid, MHA for moe, MoE MLP). `dtype` is
// F32 or BF16 (round to nearest even). Writes into a temporary directory
// beside `dir` (parents created) renamed into place without replacing
// anything; on error nothing is left. FAILED_PRECONDITION if `dir` exists;
// INVALID_ARGUMENT if the config is invalid or `weights` does not match it
// (an absent expert); I/O errors as WriteSafetensors.
Status WriteCheckpoint(const ModelConfig& config, const ModelWeights& weights,
                       const std::string& dir, DType dtype, int64_t shard_bytes = 2LL << 30);

}  // namespace sy::engine
