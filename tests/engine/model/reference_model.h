// File: tests/engine/model/reference_model.h
//
// A plain reference implementation of the model's math for tests: naive
// loops, double accumulators, no BLAS, one device, contiguous KV. Written
// apart from engine/ on purpose so that a shared bug would have to be made
// twice. Weights come from BuildWeights (with every expert local), which the
// weights tests check on their own.
//
// Thread-safety: none needed (tests only).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sy::engine::ref {

// y[out] = x[in] * W[in x out].
std::vector<float> MatVec(const std::vector<float>& x, const std::vector<float>& w, int in,
                          int out);
std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& gain, float eps);
// Rotate-half RoPE of one head vector at `pos`, angles computed directly.
std::vector<float> Rope(const std::vector<float>& x, int pos, float theta);
std::vector<float> Softmax(const std::vector<float>& x);
std::vector<float> Swiglu(const SwigluWeights& w, const std::vector<float>& x);

struct Routing {
  std::vector<int> ids;
  std::vector<float> weights;
};
// Softmax over experts, top-k by sorting (ties to lower id), optional renorm.
Routing Route(const std::vector<float>& logits, int top_k, bool renormalize);

// Routed experts (weighted, summed in rank order) plus the shared expert, for
// one post-norm token vector.
std::vector<float> Moe(const ModelConfig& c, const LayerWeights& w, const std::vector<float>& x);

// Full causal forward of `tokens` from position 0; returns logits of every
// position [tokens][vocab].
std::vector<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w,
                                        const std::vector<int32_t>& tokens);

// Weights with every expert present (what one device holds when P = 1).
ModelWeights FullWeights(const ModelConfig& c, uint64_t seed);

}  // namespace sy::engine::ref
