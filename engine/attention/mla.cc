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

// Sum over a seq's new tokens of their context length (start_pos + i + 1).
int64_t CtxSum(int start_pos, int n) {
  return static_cast<int64_t>(n) * start_pos + static_cast<int64_t>(n) * (n + 1) / 2;
}

}  // namespace

MlaAttention::MlaAttention(const ModelConfig& config)
    : config_(config),
      rope_(config.max_seq, config.qk_rope_head_dim, config.rope_theta, config.rope_interleave) {}

void MlaAttention::Forward(const MlaWeights& w, int kv_layer, int layer, const float* x, int tokens,
                           std::span<const SeqRows> seqs, KvPool* pool, float* out,
                           SpanRecorder* rec) {
  if (tokens == 0) return;
  const int h = config_.hidden, heads = config_.heads;
  const int nope = config_.qk_nope_head_dim, rope = config_.qk_rope_head_dim;
  const int vdim = config_.v_head_dim, rank = config_.kv_lora_rank;
  const int qlora = config_.q_lora_rank;
  const int lat = config_.mla_latent_dim();  // R + P: one cached token
  const int qk = nope + rope;
  const int q_cols = heads * qk;
  const int kvb_cols = heads * (nope + vdim);
  const int o_cols = heads * vdim;
  const int ps = pool->page_size();
  const int64_t t64 = tokens;
  const size_t rows = static_cast<size_t>(tokens);
  const float eps = config_.rms_eps;

  int64_t ctx_sum = 0;
  for (const SeqRows& seq : seqs) ctx_sum += CtxSum(seq.start_pos, seq.n);

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
  {
    SpanRecorder::Scope s(
        rec, "mla_kv_proj", layer, tokens,
        2 * t64 * h * lat + 4 * t64 * rank + 3 * t64 * (heads + 1) * rope,
        kF * (static_cast<int64_t>(h) * lat + rank + t64 * (h + 3 * lat + 2 * heads * rope)));
    Gemm(x, w.kv_a.data(), kv_.data(), tokens, h, lat);
    for (const SeqRows& seq : seqs) {
      for (int i = 0; i < seq.n; ++i) {
        const int r = seq.row + i, pos = seq.start_pos + i;
        float* kv = &kv_[static_cast<size_t>(r) * lat];
        RmsNorm(kv, w.kv_a_norm.data(), 1, rank, eps, kv);
        rope_.Apply(kv + rank, 1, pos);
        float* q = &q_[static_cast<size_t>(r) * q_cols];
        for (int hd = 0; hd < heads; ++hd) rope_.Apply(q + hd * qk + nope, 1, pos);
        // The cache holds only the latent [c | k_rope]: no per-head K or V.
        std::memcpy(pool->Latent(seq.pages[pos / ps], kv_layer, pos % ps), kv, lat * kF);
      }
    }
  }

  {
    SpanRecorder::Scope s(
        rec, "mla_attention", layer, tokens,
        2 * t64 * heads * nope * rank + 2 * ctx_sum * heads * lat + 2 * ctx_sum * heads * rank +
            2 * t64 * heads * rank * vdim,
        kF * (static_cast<int64_t>(rank) * kvb_cols + ctx_sum * lat + t64 * (q_cols + o_cols)));
    // Absorbed query per head: [W_uk_h q_nope_h | q_rope_h] (L floats), so a
    // score is one dot product with a cached latent row.
    const int qrow = heads * lat;
    qlat_.resize(rows * qrow);
    for (int hd = 0; hd < heads; ++hd) {
      // qlat_h[T x R] = q_nope_h[T x N] * W_uk_h^T, W_uk_h = kv_b[:, h(N+V) .. h(N+V)+N).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, rank, nope, 1.0f,
                  q_.data() + hd * qk, q_cols,
                  w.kv_b.data() + static_cast<size_t>(hd) * (nope + vdim), kvb_cols, 0.0f,
                  qlat_.data() + hd * lat, qrow);
      for (size_t r = 0; r < rows; ++r) {
        std::memcpy(&qlat_[r * qrow + hd * lat + rank], &q_[r * q_cols + hd * qk + nope],
                    rope * kF);
      }
    }
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
        // Position-major: each cached latent is read once for all heads.
        for (int j = 0; j < ctx; ++j) {
          const float* c = kv_pool.Latent(seq.pages[j / ps], kv_layer, j % ps);
          for (int hd = 0; hd < heads; ++hd) {
            scores_[static_cast<size_t>(hd) * ctx + j] = Dot(qi + hd * lat, c, lat) * scale;
          }
        }
        for (int hd = 0; hd < heads; ++hd) Softmax(&scores_[static_cast<size_t>(hd) * ctx], ctx);
        for (int j = 0; j < ctx; ++j) {
          const float* c = kv_pool.Latent(seq.pages[j / ps], kv_layer, j % ps);
          for (int hd = 0; hd < heads; ++hd) {
            Axpy(scores_[static_cast<size_t>(hd) * ctx + j], c, oi + hd * rank, rank);
          }
        }
      }
    }
    // Lift the latent outputs: o_h[T x V] = olat_h[T x R] * W_uv_h.
    o_.resize(rows * o_cols);
    for (int hd = 0; hd < heads; ++hd) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tokens, vdim, rank, 1.0f,
                  olat_.data() + hd * rank, heads * rank,
                  w.kv_b.data() + static_cast<size_t>(hd) * (nope + vdim) + nope, kvb_cols, 0.0f,
                  o_.data() + hd * vdim, o_cols);
    }
  }

  {
    const int64_t gate_flops =
        config_.mla_gate ? 2 * t64 * h * heads + t64 * heads * (4 + vdim) : 0;
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
}

}  // namespace sy::engine
