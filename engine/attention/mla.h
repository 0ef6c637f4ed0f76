// File: engine/attention/mla.h
//
// MlaAttention: Ling3's MLA full-attention layer (seed 001 §3.3), DeepSeek-V3
// multi-head latent attention with a head-wise sigmoid output gate.
//
//   q      = q_b(RMSNorm_qa(x q_a))                  -> [heads x (N + P)]   (Q-LoRA)
//            (or x q_b directly when q_lora_rank == 0)
//   c, kr  = split(x kv_a)                           -> [R], [P]
//   c      = RMSNorm_kva(c)
//   q_rope, kr = RoPE(q_rope), RoPE(kr)   interleaved pairs (2i, 2i+1) when
//            rope_interleave, else rotate-half; theta from the config
//   cache  <- [c | kr]   (latent_dim = R + P floats per token per layer)
//   score(h, j) = (q_nope_h . (c_j W_uk_h) + q_rope_h . kr_j) / sqrt(N + P)
//   o_h    = sum_j softmax_j(score) (c_j W_uv_h)     -> [heads x V]
//   o_h   *= sigmoid(x gate)_h  (fp32, when mla_gate), then out += o o_proj
//
// The cache holds only the compressed latent, never per-head K or V. The
// kernel runs the absorbed form (q_nope folded through W_uk into latent space,
// the latent-space output lifted through W_uv), which reads R + P floats per
// cached token per head; tests check it against the plain form that
// materialises k_nope and v per head:
//   qa_h   = [W_uk_h q_nope_h | q_rope_h]           (R + P)
//   score  = qa_h . [c_j | kr_j] / sqrt(N + P)
//   o_h    = (sum_j p_j c_j) W_uv_h
// RoPE positions are start_pos + i for a seq's i-th new token.
//
// Spans per call (tokens, FLOPs, bytes as the MHA spans count them):
// "mla_q_proj" (q_a, norm, q_b), "mla_kv_proj" (kv_a, norm, RoPE of q and k,
// cache write), "mla_attention" (absorb, scores, softmax, PV, lift),
// "mla_o_proj" (gate, o_proj with the residual add).
//
//   MlaAttention mla(config);
//   mla.Forward(w.mla, kv_layer, layer, xn, tokens, seqs, &kv_pool, x, &recorder);
//
// Thread-safety: one instance per device worker, used on that thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/attention/seq_rows.h"
#include "engine/model/config.h"
#include "engine/model/layers.h"
#include "engine/model/weights.h"
#include "engine/pools/kv_pool.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

class MlaAttention {
 public:
  // REQUIRES: config.Validate().ok() and config.hybrid().
  explicit MlaAttention(const ModelConfig& config);

  // x: [tokens x H] post-norm input of this device's sequences (rows per
  // `seqs`). Writes each new token's latent to the pool (KV layer `kv_layer`)
  // at its position, then adds the attention output to `out` [tokens x H]
  // (the residual stream). `layer` labels spans. rec may be null.
  // REQUIRES: pool uses the latent layout with latent_dim == mla_latent_dim();
  // every seq's page table covers start_pos + n positions; the seqs' rows
  // tile [0, tokens) (a row outside every seq gets no attention, only o_proj
  // of zeros); positions stay below config.max_seq.
  void Forward(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
               std::span<const SeqRows> seqs, KvPool* pool, float* out, SpanRecorder* rec);

 private:
  const ModelConfig config_;
  RopeTable rope_;
  // Scratch reused across layers and steps (capacity only grows).
  std::vector<float> qa_, q_, kv_, gate_, qlat_, scores_, olat_, o_;
};

}  // namespace sy::engine
