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
// "gla_recurrent" (the core; one span per form a step uses), "linear_out"
// (gated RMSNorm and o_proj with the residual add).
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
//
// Thread-safety: one instance per device worker, used on that thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/attention/seq_rows.h"
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

 private:
  // Prefill rows of a seq take the chunk-wise form unless options force the recurrence.
  bool UsesChunked(const SeqRows& seq) const;
  // KDA: causal depthwise conv + SiLU of the raw q|k|v projections (proj_) into
  // the core rows (o_), reading and advancing each seq's conv state (and
  // snapshotting it at a seq's checkpoint).
  void ShortConv(const LinearAttnWeights& w, int state_layer, int tokens,
                 std::span<const SeqRows> seqs, StatePool* pool);
  // In place on the core rows: L2 norm (KDA) of q and k, 1/sqrt(d) of q.
  void NormalizeQk(int tokens);
  // The log-decay g from x W_f into the core rows; beta = sigmoid(x W_b) in place.
  void Gates(const LinearAttnWeights& w, int tokens);
  // One seq's heads through the chunk-wise form or the recurrence, split at
  // its checkpoint if it has one.
  void RunCore(const SeqRows& seq, int state_layer, bool chunked, StatePool* pool);

  const ModelConfig config_;
  const LinearAttentionOptions options_;
  // Scratch reused across layers and steps (capacity only grows), so a step
  // allocates nothing once the largest step shape has been seen:
  // proj_ raw q|k|v [3 x T x D] (later the gated output), gate_ x W_f | x W_g
  // [2 x T x D], beta_ [T x heads], o_ the core rows [T x 5D] (q|k|v|g|o),
  // conv_ tap-major conv weights + one seq's conv window, chunk_scratch_ the
  // chunk-wise form's blocks.
  std::vector<float> proj_, gate_, beta_, o_, conv_, chunk_scratch_;
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
