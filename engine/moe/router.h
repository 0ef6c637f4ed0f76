// File: engine/moe/router.h
//
// Top-k softmax router (Mixtral / Qwen-MoE style): the router logits of a
// token go through a softmax over all experts, the k largest probabilities
// are kept (ties to the lower expert id), and, when `renormalize`, rescaled
// to sum to 1 (ModelConfig::norm_topk_prob).
//
//   RouteTopK(logits, tokens, experts, top_k, true, ids, weights);
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

}  // namespace sy::engine
