// File: tests/engine/attention/reference_mla.h
//
// The plain reference for MLA (engine/attention/mla.h), for tests: naive
// loops with double accumulators, contiguous per-sequence history, and the
// un-absorbed form that materialises k_nope_j = c_j W_uk_h and v_j = c_j W_uv_h
// for every head, as the model is written down in seed 001 §3.3. RoPE angles
// are computed directly (no table). Written apart from engine/ on purpose.
//
// Thread-safety: none needed (tests only).
#pragma once

#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sy::engine::ref {

// RoPE of one vector at `pos` with angles pos * theta^(-2i/d): interleaved
// pairs (2i, 2i+1) or rotate-half pairs (i, i + d/2).
std::vector<float> RopeDirect(const std::vector<float>& x, int pos, float theta, bool interleaved);

struct MlaResult {
  // The layer's output (what MLA adds to the residual stream), per token [H].
  std::vector<std::vector<float>> out;
  // What the cache must hold per token: [c | roped k_rope] (R + P floats).
  std::vector<std::vector<float>> latent;
};

// Causal MLA over one whole sequence from position 0; x[t] is token t's
// post-norm input [H].
MlaResult Mla(const ModelConfig& c, const MlaWeights& w, const std::vector<std::vector<float>>& x);

}  // namespace sy::engine::ref
