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
// Column blocks (tensor parallelism, tp_batch.h). With `parts` = P the
// latent row of L = R + P_rope floats is read as P contiguous column blocks
// of L/P. Forward computes every score as a sum of P partial dot products,
// one per block, added in block order (s = d_0; s += d_1; ...; s *= scale),
// and the latent-space output olat_h = sum_j p_hj c_j block by block, so
// that ForwardTp, where rank r owns block r of every cached row, performs
// exactly the same float operations: the two layouts give bit-identical
// `out` for the same `parts`. parts = 1 is the plain single-dot form.
//
// ForwardTp (mla_tp.cc): the home of a seq runs the projections, RoPE and
// the absorption of q_nope into latent space for its tokens; then
//   "mla_tp_scatter"  all-to-all: rank r gets block r of every new token's
//                     latent and of its absorbed query (all heads)
//   rank r            writes its latent block into its sharded pool and
//                     takes the partial scores of its block for every token
//                     of every seq and every context position
//   "mla_tp_scores"   all-to-all: partial scores go to the token's home,
//                     which adds them in rank order, scales and softmaxes
//   "mla_tp_probs"    all-gather: every rank gets every token's probabilities
//   rank r            computes the columns of olat in its block (those below
//                     R; the k_rope columns have no output)
//   "mla_tp_olat"     all-to-all: the columns go home, where W_uv lifts them
//                     and the gate and o_proj run exactly as in Forward.
//
// Spans per Forward call (tokens, FLOPs, bytes as the MHA spans count them):
// "mla_q_proj" (q_a, norm, q_b), "mla_kv_proj" (kv_a, norm, RoPE of q and k,
// cache write), "mla_attention" (absorb, scores, softmax, PV, lift),
// "mla_o_proj" (gate, o_proj with the residual add). ForwardTp records, on
// the home over its rows (skipped when it has none): "mla_q_proj",
// "mla_kv_proj" (no cache write), "mla_absorb", "mla_softmax", "mla_lift",
// "mla_o_proj"; on every rank over all rows of the step (skipped when the
// step has none): "mla_scores" (cache write and partial scores of its block)
// and "mla_pv" (its olat columns); plus the four comm spans above.
//
//   MlaAttention mla(config, /*parts=*/P);
//   mla.Forward(w.mla, kv_layer, layer, xn, tokens, seqs, &kv_pool, x, &recorder);
//   mla.ForwardTp(w.mla, kv_layer, layer, xn, tokens, tp, &sharded_pool, x, &recorder);
//
// Thread-safety: one instance per device worker, used on that thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/attention/seq_rows.h"
#include "engine/attention/tp_batch.h"
#include "engine/model/config.h"
#include "engine/model/layers.h"
#include "engine/model/weights.h"
#include "engine/pools/kv_pool.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

class MlaAttention {
 public:
  // REQUIRES: config.Validate().ok() and config.hybrid(); parts >= 1 divides
  // config.mla_latent_dim().
  explicit MlaAttention(const ModelConfig& config, int parts = 1);

  int parts() const { return parts_; }

  // x: [tokens x H] post-norm input of this device's sequences (rows per
  // `seqs`). Writes each new token's latent to the pool (KV layer `kv_layer`)
  // at its position, then adds the attention output to `out` [tokens x H]
  // (the residual stream). `layer` labels spans. rec may be null.
  // REQUIRES: pool uses the latent layout with latent_dim == mla_latent_dim()
  // and is unsharded; every seq's page table covers start_pos + n positions;
  // the seqs' rows lie in [0, tokens) without overlap (a row outside every
  // seq gets no attention, only o_proj of zeros); positions stay below
  // config.max_seq.
  void Forward(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
               std::span<const SeqRows> seqs, KvPool* pool, float* out, SpanRecorder* rec);

  // The tensor-parallel layer (above), called by every rank of tp.comm in the
  // same order, also when this rank (or every rank) has no rows. x/out: this
  // rank's `tokens` = tp.rows_of(tp.rank) local rows (tp.local); pages in
  // tp.all are storage ids of the sharded pools.
  // REQUIRES: as Forward, and tp.parts() == parts(); pool->shards() ==
  // parts(); tp.all is home-major with tp.local its entries homed here.
  void ForwardTp(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
                 const TpBatch& tp, KvPool* pool, float* out, SpanRecorder* rec);

 private:
  // q_ = the queries, kv_ = the normed latents, both roped, for every row
  // of `seqs` (spans "mla_q_proj", "mla_kv_proj"); with a pool, each latent
  // is also written to its cache slot.
  void Project(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
               std::span<const SeqRows> seqs, KvPool* pool, SpanRecorder* rec);
  // qlat_ [tokens x heads*L] = per head [W_uk_h q_nope_h | q_rope_h].
  void Absorb(const MlaWeights& w, int tokens);
  // o_ [tokens x heads*V] = per head olat_h W_uv_h.
  void Lift(const MlaWeights& w, int tokens);
  // The sigmoid gate on o_, then out += o_ o_proj (span "mla_o_proj").
  void OProj(const MlaWeights& w, int layer, const float* x, int tokens, float* out,
             SpanRecorder* rec);
  // Column block b of a latent row: [b * block_, b * block_ + block_); its
  // output columns are the part below kv_lora_rank: [b * block_, OutEnd(b)).
  int OutEnd(int b) const;

  const ModelConfig config_;
  const int parts_;
  const int block_;  // mla_latent_dim() / parts_
  RopeTable rope_;
  // Scratch reused across layers and steps (capacity only grows).
  std::vector<float> qa_, q_, kv_, gate_, qlat_, scores_, olat_, o_;
  // ForwardTp only: every row of the step as this rank sees it, and the
  // exchange buffers.
  std::vector<float> grow_, probs_, all_probs_;
  std::vector<std::vector<float>> send_, recv_;
};

}  // namespace sy::engine
