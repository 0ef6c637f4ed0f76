// File: engine/model_loader/hf_config.h
//
// A Hugging Face config.json <-> ModelConfig.
//
// model_type "bailing_hybrid" (Ling3, seed 001 §1.1, §3.1-3.2) is read with
// the aliases of §3.1 (num_experts_per_tok | num_experts_per_token,
// n_group | num_expert_group, norm_topk_prob | moe_renormalize,
// score_function | scoring_func | moe_router_activation_func,
// use_mla_nope | mla_use_nope); two aliases given with different values are
// refused. `head_dim` (or linear_attn_config.head_dim) is the KDA head dim;
// the MLA q/k head dim is qk_nope_head_dim + qk_rope_head_dim, and a
// `qk_head_dim` that disagrees is refused. Fields with no effect on the math
// here (architectures, torch_dtype, ...) are ignored; fields whose values we
// cannot honour (score_function other than sigmoid, use_mla_nope true,
// gated_attention_proj_granularity_type other than head_wise,
// tie_word_embeddings true, router_dtype other than fp32, no_kda_lora false,
// moe_router_enable_expert_bias false) are refused. Our extension
// `linear_attn_type`: "kda" (default) | "gla".
//
// bailing_hybrid fields. Required: vocab_size, hidden_size,
// num_hidden_layers, num_attention_heads, max_position_embeddings (-> max_seq),
// rope_theta, rms_norm_eps, eos_token_id (an int, or a list: the first is
// taken), num_experts, num_experts_per_tok, moe_intermediate_size,
// layer_group_size, q_lora_rank (null: no Q-LoRA), kv_lora_rank,
// qk_nope_head_dim, qk_rope_head_dim, v_head_dim, head_dim (or
// linear_attn_config.head_dim), short_conv_kernel_size (KDA),
// kda_lower_bound (when kda_safe_gate), intermediate_size (when
// first_k_dense_replace > 0). Optional with defaults: num_nextn_predict_layers
// (mtp_layers, 0), first_k_dense_replace 0, num_shared_experts 0,
// moe_shared_expert_intermediate_size (moe_intermediate_size; shared_inter is
// their product), n_group 1, topk_group 1, routed_scaling_factor 1,
// norm_topk_prob true, rope_interleave true, kda_safe_gate false,
// gated_attention_proj_granularity_type (absent: MLA without the output
// gate). Checked when present: qk_head_dim (== nope + rope),
// partial_rotary_factor (round(head_dim * f) == qk_rope_head_dim),
// linear_attn_config (kda_layers / full_attn_layers, 1-based, as
// layer_group_size gives them; head_dim, num_heads, short_conv_kernel_size as
// at top level). Accepted and ignored: num_key_value_heads (MHA only),
// use_qk_norm (the MLA layernorms are always there), architectures,
// torch_dtype, _name_or_path (its base name becomes the config's name),
// and any field not named here (HF configs carry many).
//
// model_type "switchyard_moe" is the foundation architecture (arch "moe"),
// written by make-checkpoint for the tiny/small presets. Required:
// vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// max_position_embeddings, rope_theta, rms_norm_eps, eos_token_id,
// num_experts, num_experts_per_tok, moe_intermediate_size. Optional:
// num_key_value_heads (= heads), head_dim (= hidden / heads),
// shared_expert_intermediate_size (0), norm_topk_prob (true),
// routed_scaling_factor (1), num_nextn_predict_layers (0).
//
// Every error is INVALID_ARGUMENT naming the field (and the file when read
// from one): missing, wrong JSON type, out of range, or contradicting another.
// Errors from ModelConfig::Validate name our field and, in parentheses, the
// config.json field it came from.
//
//   ASSIGN_OR_RETURN(ModelConfig c, LoadHfConfig("ckpt/config.json"));
//   nlohmann::json j = ToHfConfig(c);   // ParseHfConfig(j) == c
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/model/config.h"

namespace sy::engine {

Result<ModelConfig> ParseHfConfig(const nlohmann::json& j);
// Reads and parses `path`; the config's name is the directory's base name.
// NOT_FOUND if the file is missing; INVALID_ARGUMENT (prefixed with the path)
// for bad JSON or a bad field.
Result<ModelConfig> LoadHfConfig(const std::string& path);
// A config.json for `c` (name as _name_or_path); ParseHfConfig maps it back
// to a ModelConfig equal to `c` in every field. REQUIRES: c.Validate().ok().
nlohmann::json ToHfConfig(const ModelConfig& c);

}  // namespace sy::engine
