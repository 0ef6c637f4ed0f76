// File: tests/engine/attention/reference_linear.h
//
// Plain reference implementations of the KDA and GLA linear-attention layers
// (engine/attention/linear_attention.h), for tests only. Everything runs token
// by token in double precision and builds the recurrence literally:
//   KDA  S_t = (I - beta_t k_t k_t^T) Diag(exp g_t) S_{t-1} + beta_t k_t v_t^T
//   GLA  S_t = Diag(exp g_t) S_{t-1} + k_t v_t^T
//   o_t = S_t^T q_t
// with S [d x d] (key dim x value dim). KDA materialises (I - beta k k^T) and
// Diag(exp g) as d x d matrices and multiplies them, so the reference shares
// no code or algebra with the chunk-wise form or the fused recurrence.
//
//   RefLinearState st = RefLinearZeroState(config);
//   std::vector<double> y = RefLinearForward(config, w.layers[l].linear, x, 150, &st);
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sy::engine::ref {

// One token of one head. s: [d x d] row-major, updated in place; o: d values.
void KdaStep(int d, const double* q, const double* k, const double* v, const double* g, double beta,
             std::vector<double>* s, double* o);
void GlaStep(int d, const double* q, const double* k, const double* v, const double* g,
             std::vector<double>* s, double* o);

// One sequence's state of one linear layer.
struct RefLinearState {
  std::vector<double> s;     // heads x [d x d]
  std::vector<double> conv;  // KDA: conv_kernel - 1 rows of 3D pre-conv inputs, oldest first
};
RefLinearState RefLinearZeroState(const ModelConfig& config);

// The layer over `tokens` new tokens of one sequence, continuing from `state`.
// x: [tokens x hidden] post-norm input. Returns what the layer adds to the
// residual stream, [tokens x hidden].
std::vector<double> RefLinearForward(const ModelConfig& config, const LinearAttnWeights& w,
                                     const float* x, int tokens, RefLinearState* state);

}  // namespace sy::engine::ref
