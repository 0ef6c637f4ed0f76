// File: engine/model/layers.h
//
// The dense kernels of the transformer, as plain functions over row-major fp32
// buffers: RMSNorm, RoPE, SwiGLU FFN, softmax, sampling (GEMM: gemm.h).
// They allocate nothing; callers pass scratch. The MoE pieces live in
// engine/moe/, paged attention in model/attention.h.
//
//   RmsNorm(x, gain, tokens, hidden, eps, out);
//   Gemm(out, w.wqkv.data(), qkv, tokens, hidden, qkv_cols);
//
// Thread-safety: pure functions; safe from any thread on disjoint buffers.
// Gemm relies on OpenBLAS being set single-threaded by the caller's process
// (ModelRunner does so), since device workers already are threads.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/gemm.h"
#include "engine/model/weights.h"

namespace sy::engine {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * gain, for `rows` rows of `dim`.
// `out` may alias `x`.
void RmsNorm(const float* x, const float* gain, int rows, int dim, float eps, float* out);

// Rotary position embedding. For i < d/2, with f_i = theta^(-2i/d) and
// a = pos * f_i, the default rotate-half convention (GPT-NeoX / HF Llama):
//   x'[i]       = x[i] cos a - x[i + d/2] sin a
//   x'[i + d/2] = x[i + d/2] cos a + x[i] sin a;
// with `interleaved` (MLA's rope_interleave, GPT-J style, is_neox_style=False)
// the rotated pairs are adjacent instead:
//   x'[2i]      = x[2i] cos a - x[2i + 1] sin a
//   x'[2i + 1]  = x[2i + 1] cos a + x[2i] sin a.
// (HF DeepSeek-V3 de-interleaves before rotating, i.e. writes the same values
// in rotate-half order; q.k is identical since q and k get the same order.)
// Cos/sin are tabulated once for positions [0, max_seq).
class RopeTable {
 public:
  // REQUIRES: head_dim even.
  RopeTable(int max_seq, int head_dim, float theta, bool interleaved = false);
  // Rotates `n_heads` consecutive vectors of head_dim at position `pos`.
  // REQUIRES: 0 <= pos < max_seq.
  void Apply(float* x, int n_heads, int pos) const;
  int head_dim() const { return head_dim_; }
  bool interleaved() const { return interleaved_; }

 private:
  int head_dim_;
  bool interleaved_;
  int half_;
  std::vector<float> cos_, sin_;  // [max_seq x head_dim/2]
};

// silu(g) * u over SwiGLU's fused [rows x 2I] gate|up buffer, written into the
// first I columns of each row (in place).
void SiluMul(float* gate_up, int rows, int inter);

// out[rows x H] = down(silu(x Wg) * (x Wu)). `scratch` holds rows * 2I floats.
// With `accumulate`, adds into out instead of overwriting it.
void SwigluFfn(const SwigluWeights& w, const float* x, int rows, float* scratch, float* out,
               bool accumulate = false);

// In-place numerically stable softmax of n values.
void Softmax(float* x, int n);

// Greedy argmax (lowest id on ties) at temperature <= 0; otherwise samples
// from softmax(logits / temperature) with one uniform draw derived from
// `seed`. `scratch` holds n floats.
int32_t SampleToken(const float* logits, int n, float temperature, uint64_t seed, float* scratch);

}  // namespace sy::engine
