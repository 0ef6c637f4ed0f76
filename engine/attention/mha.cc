#include "engine/attention/mha.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>

#include "engine/model/gemm.h"

namespace sy::engine {

namespace {

constexpr int64_t kF = sizeof(float);

}  // namespace

MhaAttention::MhaAttention(const ModelConfig& config)
    : config_(config),
      shape_{config.heads, config.kv_heads, config.head_dim},
      q_cols_(config.heads * config.head_dim),
      kv_cols_(config.kv_heads * config.head_dim),
      qkv_cols_(q_cols_ + 2 * kv_cols_),
      // A hybrid config has no MHA layer (head_dim 0): keep the table valid.
      rope_(config.max_seq, config.head_dim > 0 ? config.head_dim : 2, config.rope_theta) {}

void MhaAttention::Project(const LayerWeights& w, int layer, const float* x, int tokens,
                           std::span<const SeqRows> seqs, SpanRecorder* rec) {
  const int h = config_.hidden;
  qkv_.resize(static_cast<size_t>(tokens) * qkv_cols_);
  {
    SpanRecorder::Scope s(rec, "qkv_proj", layer, tokens, 2LL * tokens * h * qkv_cols_,
                          kF * (static_cast<int64_t>(h) * qkv_cols_ +
                                static_cast<int64_t>(tokens) * (h + qkv_cols_)));
    Gemm(x, w.wqkv.data(), qkv_.data(), tokens, h, qkv_cols_);
  }
  SpanRecorder::Scope s(rec, "rope", layer, tokens, 3LL * tokens * (q_cols_ + kv_cols_),
                        kF * 2LL * tokens * (q_cols_ + kv_cols_));
  for (const SeqRows& seq : seqs) {
    for (int i = 0; i < seq.n; ++i) {
      float* row = &qkv_[static_cast<size_t>(seq.row + i) * qkv_cols_];
      rope_.Apply(row, config_.heads, seq.start_pos + i);
      rope_.Apply(row + q_cols_, config_.kv_heads, seq.start_pos + i);
    }
  }
}

void MhaAttention::OProj(const LayerWeights& w, int layer, int tokens, float* out,
                         SpanRecorder* rec) {
  const int h = config_.hidden;
  // The residual add is fused into the GEMM (beta = 1).
  SpanRecorder::Scope s(
      rec, "o_proj", layer, tokens, 2LL * tokens * q_cols_ * h,
      kF * (static_cast<int64_t>(q_cols_) * h + static_cast<int64_t>(tokens) * (q_cols_ + 2 * h)));
  Gemm(attn_.data(), w.wo.data(), out, tokens, q_cols_, h, /*accumulate=*/true);
}

void MhaAttention::Forward(const LayerWeights& w, int kv_layer, int layer, const float* x,
                           int tokens, std::span<const SeqRows> seqs, KvPool* pool, float* out,
                           SpanRecorder* rec) {
  if (tokens == 0) return;
  assert(pool->shards() == 1 && pool->row_floats() == kv_cols_);
  Project(w, layer, x, tokens, seqs, rec);
  attn_.assign(static_cast<size_t>(tokens) * q_cols_, 0.0f);
  {
    int64_t flops = 0, bytes = 0;
    SpanRecorder::Scope s(rec, "attention", layer, tokens);
    for (const SeqRows& seq : seqs) {
      const float* row = &qkv_[static_cast<size_t>(seq.row) * qkv_cols_];
      WriteKv(*pool, kv_layer, seq.pages, seq.start_pos, seq.n, row + q_cols_,
              row + q_cols_ + kv_cols_, qkv_cols_, shape_);
      const size_t need = static_cast<size_t>(config_.heads) * (seq.start_pos + seq.n);
      if (scores_.size() < need) scores_.resize(need);
      PagedAttention(*pool, kv_layer, seq.pages, seq.start_pos, seq.n, row, qkv_cols_, shape_,
                     scores_.data(), &attn_[static_cast<size_t>(seq.row) * q_cols_], q_cols_);
      flops += AttentionFlops(seq.start_pos, seq.n, shape_);
      // Each new token reads K and V of its whole context.
      bytes +=
          kF * (2LL * CtxSum(seq.start_pos, seq.n) * kv_cols_ + 2LL * seq.n * (q_cols_ + kv_cols_));
    }
    s.set_flops(flops);
    s.set_bytes(bytes);
  }
  OProj(w, layer, tokens, out, rec);
}

void MhaAttention::ForwardTp(const LayerWeights& w, int kv_layer, int layer, const float* x,
                             int tokens, const TpBatch& tp, KvPool* pool, float* out,
                             SpanRecorder* rec) {
  const int parts = tp.parts(), me = tp.rank;
  const int d = config_.head_dim;
  const int lq = q_cols_ / parts, lkv = kv_cols_ / parts;  // this rank's share of a row
  const int lrow = lq + 2 * lkv;                           // [q block | k block | v block]
  const AttentionShape local{config_.heads / parts, config_.kv_heads / parts, d};
  assert(config_.kv_heads % parts == 0);
  assert(pool->shards() == parts && pool->row_floats() == lkv);
  assert(tokens == tp.rows_of(me));

  // Home: projections and RoPE of its own rows, then each rank's heads.
  if (tokens > 0) Project(w, layer, x, tokens, tp.local, rec);
  send_.resize(parts);
  for (int r = 0; r < parts; ++r) {
    send_[r].resize(static_cast<size_t>(tokens) * lrow);
    for (int i = 0; i < tokens; ++i) {
      const float* src = &qkv_[static_cast<size_t>(i) * qkv_cols_];
      float* dst = &send_[r][static_cast<size_t>(i) * lrow];
      std::memcpy(dst, src + r * lq, lq * kF);
      std::memcpy(dst + lq, src + q_cols_ + r * lkv, lkv * kF);
      std::memcpy(dst + lq + lkv, src + q_cols_ + kv_cols_ + r * lkv, lkv * kF);
    }
  }
  tp.comm->AllToAll(me, send_, &recv_, rec, "mha_tp_scatter", layer);

  // Every rank: its heads of every seq. Homes arrive in rank order, which is
  // the global (home-major) packing.
  const int total = tp.total_rows();
  grow_.clear();
  for (int s = 0; s < parts; ++s) {
    assert(recv_[s].size() == static_cast<size_t>(tp.rows_of(s)) * lrow);
    grow_.insert(grow_.end(), recv_[s].begin(), recv_[s].end());
  }
  gout_.assign(static_cast<size_t>(total) * lq, 0.0f);
  if (total > 0) {
    int64_t flops = 0, bytes = 0;
    SpanRecorder::Scope s(rec, "attention", layer, total);
    for (const SeqRows& seq : tp.all) {
      const float* row = &grow_[static_cast<size_t>(seq.row) * lrow];
      WriteKv(*pool, kv_layer, seq.pages, seq.start_pos, seq.n, row + lq, row + lq + lkv, lrow,
              local);
      const size_t need = static_cast<size_t>(local.heads) * (seq.start_pos + seq.n);
      if (scores_.size() < need) scores_.resize(need);
      PagedAttention(*pool, kv_layer, seq.pages, seq.start_pos, seq.n, row, lrow, local,
                     scores_.data(), &gout_[static_cast<size_t>(seq.row) * lq], lq);
      flops += AttentionFlops(seq.start_pos, seq.n, local);
      bytes += kF * (2LL * CtxSum(seq.start_pos, seq.n) * lkv + 2LL * seq.n * (lq + lkv));
    }
    s.set_flops(flops);
    s.set_bytes(bytes);
  }
  for (int r = 0; r < parts; ++r) {
    send_[r].assign(gout_.begin() + static_cast<ptrdiff_t>(tp.home_row[r]) * lq,
                    gout_.begin() + static_cast<ptrdiff_t>(tp.home_row[r + 1]) * lq);
  }
  tp.comm->AllToAll(me, send_, &recv_, rec, "mha_tp_gather", layer);

  // Home: the whole row back together, then wo exactly as Forward.
  if (tokens == 0) return;
  attn_.resize(static_cast<size_t>(tokens) * q_cols_);
  for (int r = 0; r < parts; ++r) {
    assert(recv_[r].size() == static_cast<size_t>(tokens) * lq);
    for (int i = 0; i < tokens; ++i) {
      std::memcpy(&attn_[static_cast<size_t>(i) * q_cols_ + r * lq],
                  &recv_[r][static_cast<size_t>(i) * lq], lq * kF);
    }
  }
  OProj(w, layer, tokens, out, rec);
}

}  // namespace sy::engine
