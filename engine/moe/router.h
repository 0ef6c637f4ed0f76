// File: engine/moe/router.h
//
// The two routers of config.h's RouterKind.
//
// Softmax top-k (Mixtral / Qwen-MoE style, arch "moe"): the router logits of
// a token go through a softmax over all experts, the k largest probabilities
// are kept (ties to the lower expert id), and, when `renormalize`, rescaled
// to sum to 1 (ModelConfig::norm_topk_prob).
//
// Sigmoid grouped top-k (DeepSeek-V3 / Ling3, seed 001 §3.5), all in fp32:
//   s = sigmoid(logits); b = s + expert_bias (the bias is used only to select)
//   the experts form n_group consecutive groups; a group's score is the sum of
//   its two highest b; the topk_group best groups are kept (ties: lower group)
//   the top_k experts by b among the kept groups only, so a dropped group can
//   never contribute an expert, even when every biased score is negative
//   weights = s of the chosen experts (unbiased), divided by their sum when
//   `renormalize`, then multiplied once by `scaling` (routed_scaling_factor)
//
//   RouteTopK(logits, tokens, experts, top_k, true, ids, weights);
//   RouteGroupedSigmoid(logits, bias, tokens, {.experts = 16, .top_k = 4, .n_group = 4,
//                       .topk_group = 2, .renormalize = true, .scaling = 2.5f}, ids, weights);
//
// Output for token t, rank k (k = 0 is the largest weight):
//   ids[t * top_k + k], weights[t * top_k + k].
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>

namespace sy::engine {

// `logits` [tokens x experts] is overwritten with the softmax probabilities.
// REQUIRES: 1 <= top_k <= experts.
void RouteTopK(float* logits, int tokens, int experts, int top_k, bool renormalize, int32_t* ids,
               float* weights);

struct GroupedRouting {
  int experts = 0;
  int top_k = 0;
  int n_group = 1;
  int topk_group = 1;
  bool renormalize = true;
  float scaling = 1.0f;
};

// `logits` [tokens x experts] is overwritten with the sigmoid scores; `bias`
// holds `experts` values. Ids are ordered by biased score, highest first.
// REQUIRES: experts % n_group == 0, 1 <= topk_group <= n_group,
// 1 <= top_k <= topk_group * experts / n_group.
void RouteGroupedSigmoid(float* logits, const float* bias, int tokens, const GroupedRouting& r,
                         int32_t* ids, float* weights);

}  // namespace sy::engine
