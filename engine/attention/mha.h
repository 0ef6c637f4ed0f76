// File: engine/attention/mha.h
//
// MhaAttention: the foundation model's full-attention layer (arch "moe"):
// multi-head attention with GQA over the paged KV cache, rotate-half RoPE
// on q and k (model/attention.h has the kernels).
//
//   qkv  = x wqkv                                  -> [heads | kv_heads | kv_heads] x head_dim
//   q, k = RoPE(q), RoPE(k)                        at position start_pos + i
//   cache <- k, v                                  (kv_heads * head_dim floats each)
//   o_h  = softmax(q_h . K_g / sqrt(head_dim)) V_g  with g = h / (heads / kv_heads)
//   out += o wo                                    (the residual add, fused into the GEMM)
//
// Two layouts (tp_batch.h):
//  * Forward (data parallel, EP): a device runs the whole layer for its own
//    seqs over its own unsharded KvPool.
//  * ForwardTp (tensor parallel): each seq's home computes qkv and RoPE for
//    its tokens; one all-to-all ("mha_tp_scatter") hands rank r the q of
//    query heads [r heads/P, (r+1) heads/P) and k/v of KV heads
//    [r kv_heads/P, (r+1) kv_heads/P) of every token; rank r writes its KV
//    block into its sharded pool and runs paged attention for its heads over
//    every seq of the step; a second all-to-all ("mha_tp_gather") returns
//    each home its tokens' head outputs, and the home runs wo over the whole
//    row. Since a head's scores, softmax and weighted sum only ever read
//    that head's q and its KV head, rank r does exactly the float operations
//    Forward does for those heads: the two layouts give bit-identical `out`.
//
// Spans: Forward records "qkv_proj", "rope", "attention", "o_proj" (the
// names and FLOP/byte estimates DeviceWorker used). ForwardTp records
// "qkv_proj", "rope" and "o_proj" on the home (its rows; skipped when it has
// none), "attention" on every rank over all rows of the step for its heads
// (skipped when the step has no rows), and the two comm spans.
//
//   MhaAttention mha(config);
//   mha.Forward(w, kv_layer, layer, xn, tokens, seqs, &kv_pool, x, &recorder);
//
// Thread-safety: one instance per device worker, used on that thread only.
#pragma once

#include <span>
#include <vector>

#include "engine/attention/seq_rows.h"
#include "engine/attention/tp_batch.h"
#include "engine/model/attention.h"
#include "engine/model/config.h"
#include "engine/model/layers.h"
#include "engine/model/weights.h"
#include "engine/pools/kv_pool.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

class MhaAttention {
 public:
  // REQUIRES: config.Validate().ok(); the MHA fields (heads, kv_heads,
  // head_dim) are used.
  explicit MhaAttention(const ModelConfig& config);

  // x: [tokens x H] post-norm input of this device's seqs (rows per `seqs`).
  // Writes each new token's K and V to the pool (KV layer `kv_layer`) at its
  // position, then adds the attention output projected through w.wo to
  // `out` [tokens x H]. `layer` labels spans; rec may be null. Does nothing
  // when tokens == 0.
  // REQUIRES: the pool is unsharded (shards() == 1) with kv_heads and
  // head_dim of the config; every seq's page table covers start_pos + n
  // positions; the seqs' rows lie in [0, tokens) without overlap (a row in
  // no seq gets o_proj of zeros); positions stay below config.max_seq.
  void Forward(const LayerWeights& w, int kv_layer, int layer, const float* x, int tokens,
               std::span<const SeqRows> seqs, KvPool* pool, float* out, SpanRecorder* rec);

  // The tensor-parallel layer, called by every rank of tp.comm in the same
  // order, also when this rank (or every rank) has no rows. x/out: this
  // rank's `tokens` = tp.rows_of(tp.rank) local rows (tp.local); pages in
  // tp.all are storage ids of the sharded pools.
  // REQUIRES: as Forward, and P = tp.parts() divides kv_heads; pool->shards()
  // == P; tp.all is home-major with tp.local its entries homed here.
  void ForwardTp(const LayerWeights& w, int kv_layer, int layer, const float* x, int tokens,
                 const TpBatch& tp, KvPool* pool, float* out, SpanRecorder* rec);

 private:
  // qkv_ = x wqkv, then RoPE of q and k of every row of `seqs` (spans
  // "qkv_proj", "rope").
  void Project(const LayerWeights& w, int layer, const float* x, int tokens,
               std::span<const SeqRows> seqs, SpanRecorder* rec);
  // out += attn_ wo (span "o_proj").
  void OProj(const LayerWeights& w, int layer, int tokens, float* out, SpanRecorder* rec);

  const ModelConfig config_;
  const AttentionShape shape_;
  const int q_cols_, kv_cols_, qkv_cols_;
  RopeTable rope_;
  // Scratch reused across layers and steps (capacity only grows).
  std::vector<float> qkv_, attn_, scores_;
  std::vector<float> grow_, gout_;  // TP: this rank's heads of every row of the step
  std::vector<std::vector<float>> send_, recv_;
};

}  // namespace sy::engine
