// File: engine/attention/linear_attention.h
//
// LinearAttention: the linear-attention layers of a hybrid model, whose
// history is a fixed-size recurrent state per request (StatePool) instead of
// a KV entry per token.
//
// KDA (Ling3, seed 001 §3.4), per head, d = linear_head_dim:
//   q, k, v = SiLU(causal_conv_K(x W_q | x W_k | x W_v))   depthwise, width K,
//             continuing from the slot's conv state
//   q, k    = L2-normalised per head; q is scaled by 1/sqrt(d) (FLA's default)
//   beta_t  = sigmoid(x W_b)_h
//   g_t     = log-decay per channel [d]:
//               lower_bound * sigmoid(exp(A_log_h) * (x W_f + dt_bias))   (lower bound set)
//               -exp(A_log_h) * softplus(x W_f + dt_bias)                 (otherwise)
//   S_t     = (I - beta_t k_t k_t^T) Diag(exp(g_t)) S_{t-1} + beta_t k_t v_t^T   S: [d x d]
//   o_t     = S_t^T q_t
// GLA (seed 000), same projections without conv or beta, q scaled by 1/sqrt(d):
//   S_t     = Diag(exp(g_t)) S_{t-1} + k_t v_t^T,  o_t = S_t^T q_t
//   with g_t from the second (no lower bound) formula.
// Both then: out += (RMSNorm_d(o_t) * o_norm * sigmoid(x W_g)) W_o   per head.
//
// Prefill (n > 1 new tokens) runs the chunk-wise form: 64-token chunks, the
// intra-chunk recurrence solved as dense block math (the WY / UT-transform
// form of the delta rule for KDA), only the chunk boundary serial. Decode
// (n == 1) runs the recurrence. Both equal the token-by-token recurrence up to
// float rounding (tested); PrefillMode::kRecurrent forces the recurrence for
// every token (the benchmark's baseline).
//
// The chunk-wise form never divides by a cumulative decay (with the -5 lower
// bound one chunk's decay reaches e^-320): every exp(G_t - G_j), t >= j, is a
// product of per-token decays <= 1, and the products between 16-token blocks
// factor through the block boundary so they run as GEMMs.
//
// Spans per call (tokens, FLOPs, bytes estimated like the MHA spans):
// "linear_proj" (q/k/v/f/g/b GEMMs and the gates), "short_conv" (KDA: conv,
// SiLU, L2 norm), "kda_chunk" / "kda_recurrent" / "gla_chunk" /
// "gla_recurrent" (the core, with GLA's q scale; one span per form a step
// uses), "linear_out" (gated RMSNorm and o_proj with the residual add).
// ForwardTp adds the comm spans "linear_tp_scatter" and "linear_tp_gather"
// and counts the conv and core spans over all homes' rows and its heads.
//
// Tensor parallel (ForwardTp, tp_batch.h): the layer runs in three stages,
// and Forward runs the same three over all heads of its own rows:
//   home      Project: the q/k/v/f/g/b GEMMs, the decay g and beta
//   per head  ConvNormCore over a block of heads: fresh seqs' state zeroed,
//             the short conv (continuing and advancing the conv state's
//             channels of those heads), q/k norm, the core, checkpoints
//   home      Out: gated RMSNorm per head over the whole row, o_proj
// Under TP an all-to-all ("linear_tp_scatter") sends rank r, per token, its
// heads' raw q, k, v channels, g and beta, and another ("linear_tp_gather")
// brings each home its tokens' per-head outputs. Every per-head and
// per-channel operation is the same call on the same values in both paths
// (the vector helpers run one head's d channels per call, so no element's
// rounding depends on where a block starts), hence ForwardTp over P
// sharded pools gives outputs and states bit-identical to Forward on the P
// homes' unsharded pools.
//
// Scratch lives in members and only grows, so steps allocate nothing once
// the largest step shape has been seen.
//
// A sequence with start_pos == 0 starts from zero: Forward zeroes this layer's
// recurrent and conv state in the slot before use (a slot handed out by the
// pool may hold a previous owner's state); otherwise it continues from the
// slot as the previous chunk or decode step left it.
//
// Prefix-cache checkpoints (seed 002 §2.1): a seq with checkpoint_slot >= 0
// and checkpoint_at = m (1..n) also leaves, in this layer of checkpoint_slot,
// the recurrent state after its first m new tokens and the conv state at that
// point (the last K-1 pre-conv inputs before position start_pos + m). The
// core runs over rows [0, m), the state is copied, and it continues over
// [m, n), so the seq's own outputs and final state differ from an unsplit run
// only by float rounding (the chunk boundaries of the second part move).
// Every layer writes its whole layer of the checkpoint slot, so a step that
// runs all linear layers leaves the slot fully written (nothing stale).
//
//   LinearAttention lin(config);
//   lin.Forward(w.linear, state_layer, layer, xn, tokens, seqs, &state_pool, x, &recorder);
//   // TP: on every rank r, pool sharded P ways, tp from the device worker
//   lin.ForwardTp(w.linear, state_layer, layer, xn, tp.rows_of(r), tp, &state_pool, x, &recorder);
//
// Thread-safety: one instance per device worker, used on that thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/attention/seq_rows.h"
#include "engine/attention/tp_batch.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/pools/state_pool.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

enum class PrefillMode { kChunked, kRecurrent };

struct LinearAttentionOptions {
  int chunk = 64;  // tokens per chunk in the chunk-wise prefill
  PrefillMode prefill = PrefillMode::kChunked;
};

class LinearAttention {
 public:
  // REQUIRES: config.Validate().ok() and config.hybrid().
  explicit LinearAttention(const ModelConfig& config, LinearAttentionOptions options = {});

  // x: [tokens x H] post-norm input of this device's sequences; adds the
  // layer's output to `out` [tokens x H]. Reads and advances each seq's state
  // slot (layer `state_layer` of `pool`), and writes each checkpointing seq's
  // snapshot into that layer of its checkpoint_slot. `layer` labels spans;
  // rec may be null.
  // REQUIRES: every seq has a valid state_slot; seqs' rows are disjoint and
  // lie in [0, tokens); a seq's checkpoint_slot, if >= 0, is valid, differs
  // from every seq's state_slot and every other checkpoint_slot, and its
  // checkpoint_at is in [1, n]; w holds this layer's linear weights for config.
  void Forward(const LinearAttnWeights& w, int state_layer, int layer, const float* x, int tokens,
               std::span<const SeqRows> seqs, StatePool* pool, float* out, SpanRecorder* rec);

  // The same layer with attention tensor parallel (tp_batch.h): x / out are
  // this rank's own rows [tokens x H] (tokens == tp.rows_of(tp.rank), may be
  // 0); pool is sharded tp.parts() ways and holds this rank's block (heads
  // [r heads/P, (r+1) heads/P)) of every home's slots; tp.all's slot ids are
  // storage slots. Runs the projections and o_proj for this rank's rows and
  // the per-head work of its heads for every seq of every home. A
  // collective: every rank calls it, in the same layer order, even with no
  // rows. Outputs and states are bit-identical to Forward per home.
  // REQUIRES: as Forward for tp.all (rows in the global packing, storage
  // slots < pool->storage_slots()); tp.parts() divides config.heads;
  // pool->shards() == tp.parts().
  void ForwardTp(const LinearAttnWeights& w, int state_layer, int layer, const float* x, int tokens,
                 const TpBatch& tp, StatePool* pool, float* out, SpanRecorder* rec);

 private:
  // The heads [h0, h0 + n) the per-head stage runs: all of them under EP,
  // this rank's block under TP. dl = n * linear_head_dim channels.
  struct Heads {
    int h0 = 0;
    int n = 0;
  };

  // Home stage over `tokens` rows of x: leaves the raw (pre-conv) q, k, v
  // and the log-decay g as four [T x D] blocks of proj_, beta [T x heads] in
  // beta_ (KDA) and x W_g [T x D] after x W_f in gate_.
  void Project(const LinearAttnWeights& w, int layer, const float* x, int tokens,
               SpanRecorder* rec);
  // The log-decay g from x W_f into proj_'s fourth block; beta in place.
  void Gates(const LinearAttnWeights& w, int tokens);
  // Per-head stage over the heads `hb` of `rows` core rows: core_ is [rows x
  // 5 dl], q | k | v | g | o of those heads, holding the raw q, k, v and g on
  // entry and the core input / output on return; beta [rows x hb.n]. Zeroes
  // fresh seqs' state, runs the short conv (KDA), the q/k norm and the core
  // of every seq (rows index core rows; slots are pool's, whose
  // state_floats() / conv_floats() are exactly those heads' share).
  void ConvNormCore(const LinearAttnWeights& w, int state_layer, int layer, Heads hb, int rows,
                    std::span<const SeqRows> seqs, const float* beta, StatePool* pool,
                    SpanRecorder* rec);
  // Prefill rows of a seq take the chunk-wise form unless options force the recurrence.
  bool UsesChunked(const SeqRows& seq) const;
  // KDA: causal depthwise conv + SiLU of the raw q|k|v channels of `hb` in
  // place in core_, reading and advancing each seq's conv state (and
  // snapshotting it at a seq's checkpoint).
  void ShortConv(const LinearAttnWeights& w, int state_layer, Heads hb,
                 std::span<const SeqRows> seqs, StatePool* pool);
  // In place on core rows [from, from + n): L2 norm (KDA) of q and k, 1/sqrt(d) of q.
  void NormalizeQk(Heads hb, int from, int n);
  // One seq's heads through the chunk-wise form or the recurrence, split at
  // its checkpoint if it has one.
  void RunCore(const SeqRows& seq, int state_layer, Heads hb, const float* beta, bool chunked,
               StatePool* pool);
  // Home stage: gated RMSNorm per head of o (tokens rows of D, row stride
  // o_stride) times sigmoid(x W_g), then out += that W_o.
  void Out(const LinearAttnWeights& w, int layer, int tokens, const float* o, int o_stride,
           float* out, SpanRecorder* rec);
  // TP (linear_tp.cc): the all-to-all of each rank's share of this home's
  // projections into core_ / tbeta_, and of the core outputs back into
  // proj_'s second block [tokens x D].
  void Scatter(const TpBatch& tp, int tokens, Heads hb, int layer, SpanRecorder* rec);
  void Gather(const TpBatch& tp, int tokens, Heads hb, int layer, SpanRecorder* rec);

  const ModelConfig config_;
  const LinearAttentionOptions options_;
  // Scratch reused across layers and steps (capacity only grows), so a step
  // allocates nothing once the largest step shape has been seen:
  // proj_ raw q|k|v and g [4 x T x D] (later the gated output and, under TP,
  // the gathered core outputs), gate_ x W_f | x W_g [2 x T x D], beta_
  // [T x heads], core_ the core rows [rows x 5 dl] (q|k|v|g|o), tbeta_ the
  // core rows' beta under TP, conv_ tap-major conv weights + one seq's conv
  // window, chunk_scratch_ the chunk-wise form's blocks; send_ / recv_ the
  // TP all-to-all buffers.
  std::vector<float> proj_, gate_, beta_, core_, tbeta_, conv_, chunk_scratch_;
  std::vector<std::vector<float>> send_, recv_;
};

// The recurrence cores, for one head over T tokens, exposed for tests and
// benchmarks. Rows are strided: token t of q is q + t * stride (likewise k, v,
// g, o); beta[t * beta_stride]. S is [d x d] row-major (key dim x value dim),
// read as the initial state and left as the final state. o gets T rows of d.
// g holds log-decays (<= 0); beta (KDA) in (0, 1). scratch only grows.
// REQUIRES: d >= 1, chunk >= 1, o's rows do not overlap q, k, v or g.
void KdaRecurrent(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int beta_stride, int tokens, int d, int stride, float* s, float* o);
void KdaChunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                int beta_stride, int tokens, int d, int stride, int chunk, float* s, float* o,
                std::vector<float>* scratch);
void GlaRecurrent(const float* q, const float* k, const float* v, const float* g, int tokens, int d,
                  int stride, float* s, float* o);
void GlaChunked(const float* q, const float* k, const float* v, const float* g, int tokens, int d,
                int stride, int chunk, float* s, float* o, std::vector<float>* scratch);

}  // namespace sy::engine
