#include "engine/attention/mla.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/model/gemm.h"

namespace sy::engine {

namespace {

constexpr int64_t kF = sizeof(float);

}  // namespace

MlaAttention::MlaAttention(const ModelConfig& config, int parts)
    : config_(config),
      parts_(parts),
      block_(config.mla_latent_dim() / parts),
      rope_(config.max_seq, config.qk_rope_head_dim, config.rope_theta, config.rope_interleave) {
  assert(parts >= 1 && config.mla_latent_dim() % parts == 0);
}

int MlaAttention::OutEnd(int b) const {
  return std::max(b * block_, std::min((b + 1) * block_, config_.kv_lora_rank));
}

void MlaAttention::Project(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
                           std::span<const SeqRows> seqs, KvPool* pool, SpanRecorder* rec) {
  const int h = config_.hidden, heads = config_.heads;
  const int nope = config_.qk_nope_head_dim, rope = config_.qk_rope_head_dim;
  const int rank = config_.kv_lora_rank, qlora = config_.q_lora_rank;
  const int lat = config_.mla_latent_dim();  // R + P: one cached token
  const int qk = nope + rope;
  const int q_cols = heads * qk;
  const int64_t t64 = tokens;
  const size_t rows = static_cast<size_t>(tokens);
  const float eps = config_.rms_eps;

  q_.resize(rows * q_cols);
  {
    SpanRecorder::Scope s(rec, "mla_q_proj", layer, tokens);
    if (qlora > 0) {
      qa_.resize(rows * qlora);
      Gemm(x, w.q_a.data(), qa_.data(), tokens, h, qlora);
      RmsNorm(qa_.data(), w.q_a_norm.data(), tokens, qlora, eps, qa_.data());
      Gemm(qa_.data(), w.q_b.data(), q_.data(), tokens, qlora, q_cols);
      s.set_flops(2 * t64 * h * qlora + 4 * t64 * qlora + 2 * t64 * qlora * q_cols);
      s.set_bytes(kF * (static_cast<int64_t>(h) * qlora + qlora +
                        static_cast<int64_t>(qlora) * q_cols + t64 * (h + 2 * qlora + q_cols)));
    } else {
      Gemm(x, w.q_b.data(), q_.data(), tokens, h, q_cols);
      s.set_flops(2 * t64 * h * q_cols);
      s.set_bytes(kF * (static_cast<int64_t>(h) * q_cols + t64 * (h + q_cols)));
    }
  }

  kv_.resize(rows * lat);
  SpanRecorder::Scope s(rec, "mla_kv_proj", layer, tokens,
                        2 * t64 * h * lat + 4 * t64 * rank + 3 * t64 * (heads + 1) * rope,
                        kF * (static_cast<int64_t>(h) * lat + rank +
                              t64 * (h + (pool != nullptr ? 3 : 2) * lat + 2 * heads * rope)));
  Gemm(x, w.kv_a.data(), kv_.data(), tokens, h, lat);
  const int ps = pool != nullptr ? pool->page_size() : 1;
  for (const SeqRows& seq : seqs) {
    for (int i = 0; i < seq.n; ++i) {
      const int r = seq.row + i, pos = seq.start_pos + i;
      float* kv = &kv_[static_cast<size_t>(r) * lat];
      RmsNorm(kv, w.kv_a_norm.data(), 1, rank, eps, kv);
      rope_.Apply(kv + rank, 1, pos);
      float* q = &q_[static_cast<size_t>(r) * q_cols];
      for (int hd = 0; hd < heads; ++hd) rope_.Apply(q + hd * qk + nope, 1, pos);
      // The cache holds only the latent [c | k_rope]: no per-head K or V.
      if (pool != nullptr) {
        std::memcpy(pool->Latent(seq.pages[pos / ps], kv_layer, pos % ps), kv, lat * kF);
      }
    }
  }
}

void MlaAttention::Absorb(const MlaWeights& w, int tokens) {
  const int heads = config_.heads, nope = config_.qk_nope_head_dim;
  const int rope = config_.qk_rope_head_dim, vdim = config_.v_head_dim;
  const int rank = config_.kv_lora_rank, lat = config_.mla_latent_dim();
  const int qk = nope + rope, q_cols = heads * qk, kvb_cols = heads * (nope + vdim);
  // Absorbed query per head: [W_uk_h q_nope_h | q_rope_h] (L floats), so a
  // score is one dot product with a cached latent row.
  const int qrow = heads * lat;
  qlat_.resize(static_cast<size_t>(tokens) * qrow);
  if (tokens == 0) return;
  for (int hd = 0; hd < heads; ++hd) {
    // qlat_h[T x R] = q_nope_h[T x N] * W_uk_h^T, W_uk_h = kv_b[:, h(N+V) .. h(N+V)+N).
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, rank, nope, 1.0f,
                q_.data() + hd * qk, q_cols,
                w.kv_b.data() + static_cast<size_t>(hd) * (nope + vdim), kvb_cols, 0.0f,
                qlat_.data() + hd * lat, qrow);
    for (int r = 0; r < tokens; ++r) {
      std::memcpy(&qlat_[static_cast<size_t>(r) * qrow + hd * lat + rank],
                  &q_[static_cast<size_t>(r) * q_cols + hd * qk + nope], rope * kF);
    }
  }
}

void MlaAttention::Lift(const MlaWeights& w, int tokens) {
  const int heads = config_.heads, nope = config_.qk_nope_head_dim;
  const int vdim = config_.v_head_dim, rank = config_.kv_lora_rank;
  const int kvb_cols = heads * (nope + vdim), o_cols = heads * vdim;
  // o_h[T x V] = olat_h[T x R] * W_uv_h.
  o_.resize(static_cast<size_t>(tokens) * o_cols);
  if (tokens == 0) return;
  for (int hd = 0; hd < heads; ++hd) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tokens, vdim, rank, 1.0f,
                olat_.data() + hd * rank, heads * rank,
                w.kv_b.data() + static_cast<size_t>(hd) * (nope + vdim) + nope, kvb_cols, 0.0f,
                o_.data() + hd * vdim, o_cols);
  }
}

void MlaAttention::OProj(const MlaWeights& w, int layer, const float* x, int tokens, float* out,
                         SpanRecorder* rec) {
  const int h = config_.hidden, heads = config_.heads, vdim = config_.v_head_dim;
  const int o_cols = heads * vdim;
  const int64_t t64 = tokens;
  const size_t rows = static_cast<size_t>(tokens);
  const int64_t gate_flops = config_.mla_gate ? 2 * t64 * h * heads + t64 * heads * (4 + vdim) : 0;
  const int64_t gate_bytes =
      config_.mla_gate ? kF * (static_cast<int64_t>(h) * heads + 2 * t64 * heads) : 0;
  SpanRecorder::Scope s(
      rec, "mla_o_proj", layer, tokens, gate_flops + 2 * t64 * o_cols * h,
      gate_bytes + kF * (static_cast<int64_t>(o_cols) * h + t64 * (o_cols + 2 * h)));
  if (config_.mla_gate) {
    gate_.resize(rows * heads);
    Gemm(x, w.gate.data(), gate_.data(), tokens, h, heads);
    for (size_t r = 0; r < rows; ++r) {
      for (int hd = 0; hd < heads; ++hd) {
        const float g = 1.0f / (1.0f + std::exp(-gate_[r * heads + hd]));
        float* o = &o_[r * o_cols + hd * vdim];
        for (int v = 0; v < vdim; ++v) o[v] *= g;
      }
    }
  }
  // The residual add is fused into the GEMM (beta = 1).
  Gemm(o_.data(), w.o.data(), out, tokens, o_cols, h, /*accumulate=*/true);
}

void MlaAttention::Forward(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
                           std::span<const SeqRows> seqs, KvPool* pool, float* out,
                           SpanRecorder* rec) {
  if (tokens == 0) return;
  assert(pool->shards() == 1);
  const int heads = config_.heads;
  const int nope = config_.qk_nope_head_dim, rope = config_.qk_rope_head_dim;
  const int vdim = config_.v_head_dim, rank = config_.kv_lora_rank;
  const int lat = config_.mla_latent_dim();
  const int qk = nope + rope;
  const int ps = pool->page_size();
  const int64_t t64 = tokens;
  const size_t rows = static_cast<size_t>(tokens);

  int64_t ctx_sum = 0;
  for (const SeqRows& seq : seqs) ctx_sum += CtxSum(seq.start_pos, seq.n);

  Project(w, kv_layer, layer, x, tokens, seqs, pool, rec);

  {
    SpanRecorder::Scope s(rec, "mla_attention", layer, tokens,
                          2 * t64 * heads * nope * rank + 2 * ctx_sum * heads * lat +
                              2 * ctx_sum * heads * rank + 2 * t64 * heads * rank * vdim,
                          kF * (static_cast<int64_t>(rank) * heads * (nope + vdim) + ctx_sum * lat +
                                t64 * (heads * qk + heads * vdim)));
    Absorb(w, tokens);
    const int qrow = heads * lat;
    const float scale = 1.0f / std::sqrt(static_cast<float>(qk));
    const KvPool& kv_pool = *pool;
    olat_.assign(rows * heads * rank, 0.0f);
    for (const SeqRows& seq : seqs) {
      for (int i = 0; i < seq.n; ++i) {
        const int ctx = seq.start_pos + i + 1;
        const size_t need = static_cast<size_t>(heads) * ctx;
        if (scores_.size() < need) scores_.resize(need);
        const float* qi = &qlat_[static_cast<size_t>(seq.row + i) * qrow];
        float* oi = &olat_[static_cast<size_t>(seq.row + i) * heads * rank];
        // Position-major: each cached latent is read once for all heads. A
        // score is the block-ordered sum of per-block dots (see the header).
        for (int j = 0; j < ctx; ++j) {
          const float* c = kv_pool.Latent(seq.pages[j / ps], kv_layer, j % ps);
          for (int hd = 0; hd < heads; ++hd) {
            const float* qh = qi + hd * lat;
            float sc = Dot(qh, c, block_);
            for (int b = 1; b < parts_; ++b) sc += Dot(qh + b * block_, c + b * block_, block_);
            scores_[static_cast<size_t>(hd) * ctx + j] = sc * scale;
          }
        }
        for (int hd = 0; hd < heads; ++hd) Softmax(&scores_[static_cast<size_t>(hd) * ctx], ctx);
        for (int j = 0; j < ctx; ++j) {
          const float* c = kv_pool.Latent(seq.pages[j / ps], kv_layer, j % ps);
          for (int hd = 0; hd < heads; ++hd) {
            const float p = scores_[static_cast<size_t>(hd) * ctx + j];
            for (int b = 0; b < parts_ && b * block_ < rank; ++b) {
              Axpy(p, c + b * block_, oi + hd * rank + b * block_, OutEnd(b) - b * block_);
            }
          }
        }
      }
    }
    Lift(w, tokens);
  }
  OProj(w, layer, x, tokens, out, rec);
}

}  // namespace sy::engine
