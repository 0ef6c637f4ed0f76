// MlaAttention::ForwardTp: tensor-parallel MLA over column blocks of the
// latent (mla.h, tp_batch.h).
//
// Layouts of the exchanges (every rank derives them from tp.all alone):
//  * scatter: per row of the sender's local packing, [latent block r |
//    qlat block r of head 0 | ... | head heads-1], (1 + heads) * block floats;
//    a rank concatenates what it receives in rank order, which is the global
//    (home-major) packing.
//  * scores / probs: per seq in tp.all order, per new token i, heads rows of
//    ctx = start_pos + i + 1 floats (head-major), exactly the scores_ layout
//    of Forward. A home's part is contiguous, so the all-gather of the homes'
//    probabilities is the whole step's in global order.
//  * olat: per row of the home's local packing, heads * (OutEnd(r) - r block)
//    floats: rank r's columns of each head's latent output.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/attention/mla.h"
#include "engine/model/gemm.h"

namespace sy::engine {

namespace {

constexpr int64_t kF = sizeof(float);

}  // namespace

void MlaAttention::ForwardTp(const MlaWeights& w, int kv_layer, int layer, const float* x,
                             int tokens, const TpBatch& tp, KvPool* pool, float* out,
                             SpanRecorder* rec) {
  const int parts = tp.parts(), me = tp.rank;
  const int heads = config_.heads, nope = config_.qk_nope_head_dim;
  const int rope = config_.qk_rope_head_dim, vdim = config_.v_head_dim;
  const int rank = config_.kv_lora_rank, lat = config_.mla_latent_dim();
  const int blk = block_;
  const int srow = (1 + heads) * blk;  // scatter row: latent block, then qlat blocks
  const int ps = pool->page_size();
  const int total = tp.total_rows();
  const int64_t t64 = tokens;
  assert(parts == parts_);
  assert(pool->shards() == parts && pool->row_floats() == blk);
  assert(tokens == tp.rows_of(me));

  int64_t ctx_local = 0, ctx_all = 0;
  for (const SeqRows& seq : tp.local) ctx_local += CtxSum(seq.start_pos, seq.n);
  for (const SeqRows& seq : tp.all) ctx_all += CtxSum(seq.start_pos, seq.n);

  // Home: projections and the absorbed queries of its own rows.
  if (tokens > 0) {
    Project(w, kv_layer, layer, x, tokens, tp.local, /*pool=*/nullptr, rec);
    SpanRecorder::Scope s(
        rec, "mla_absorb", layer, tokens, 2 * t64 * heads * nope * rank,
        kF * (static_cast<int64_t>(rank) * heads * nope + t64 * heads * (nope + rope + lat)));
    Absorb(w, tokens);
  }
  send_.resize(parts);
  for (int r = 0; r < parts; ++r) {
    send_[r].resize(static_cast<size_t>(tokens) * srow);
    for (int i = 0; i < tokens; ++i) {
      float* dst = &send_[r][static_cast<size_t>(i) * srow];
      std::memcpy(dst, &kv_[static_cast<size_t>(i) * lat + r * blk], blk * kF);
      const float* q = &qlat_[static_cast<size_t>(i) * heads * lat + r * blk];
      for (int hd = 0; hd < heads; ++hd) {
        std::memcpy(dst + (1 + hd) * blk, q + static_cast<size_t>(hd) * lat, blk * kF);
      }
    }
  }
  tp.comm->AllToAll(me, send_, &recv_, rec, "mla_tp_scatter", layer);
  grow_.clear();
  for (int s = 0; s < parts; ++s) {
    assert(recv_[s].size() == static_cast<size_t>(tp.rows_of(s)) * srow);
    grow_.insert(grow_.end(), recv_[s].begin(), recv_[s].end());
  }

  // Every rank: cache its block of the new latents, then the partial scores
  // of its block for every token of the step, sent to the token's home.
  for (int r = 0; r < parts; ++r) send_[r].clear();
  if (total > 0) {
    SpanRecorder::Scope s(
        rec, "mla_scores", layer, total, 2 * ctx_all * heads * blk,
        kF * (static_cast<int64_t>(total) * (srow + blk) + ctx_all * (blk + heads)));
    for (const SeqRows& seq : tp.all) {
      for (int i = 0; i < seq.n; ++i) {
        const int pos = seq.start_pos + i;
        std::memcpy(pool->Latent(seq.pages[pos / ps], kv_layer, pos % ps),
                    &grow_[static_cast<size_t>(seq.row + i) * srow], blk * kF);
      }
    }
    const KvPool& kv_pool = *pool;
    for (size_t k = 0; k < tp.all.size(); ++k) {
      const SeqRows& seq = tp.all[k];
      std::vector<float>& dst = send_[tp.home[k]];
      for (int i = 0; i < seq.n; ++i) {
        const int ctx = seq.start_pos + i + 1;
        const size_t base = dst.size();
        dst.resize(base + static_cast<size_t>(heads) * ctx);
        const float* qi = &grow_[static_cast<size_t>(seq.row + i) * srow + blk];
        for (int j = 0; j < ctx; ++j) {
          const float* c = kv_pool.Latent(seq.pages[j / ps], kv_layer, j % ps);
          for (int hd = 0; hd < heads; ++hd) {
            dst[base + static_cast<size_t>(hd) * ctx + j] = Dot(qi + hd * blk, c, blk);
          }
        }
      }
    }
  }
  tp.comm->AllToAll(me, send_, &recv_, rec, "mla_tp_scores", layer);

  // Home: whole scores as Forward adds them (block order = rank order), then
  // the softmax.
  const size_t nprob = static_cast<size_t>(ctx_local) * heads;
  probs_.resize(nprob);
  if (tokens > 0) {
    SpanRecorder::Scope s(rec, "mla_softmax", layer, tokens,
                          static_cast<int64_t>(nprob) * (parts + 4),
                          kF * static_cast<int64_t>(nprob) * (parts + 1));
    for (int r = 0; r < parts; ++r) assert(recv_[r].size() == nprob);
    const float scale = 1.0f / std::sqrt(static_cast<float>(nope + rope));
    for (size_t e = 0; e < nprob; ++e) {
      float sc = recv_[0][e];
      for (int r = 1; r < parts; ++r) sc += recv_[r][e];
      probs_[e] = sc * scale;
    }
    size_t off = 0;
    for (const SeqRows& seq : tp.local) {
      for (int i = 0; i < seq.n; ++i) {
        const int ctx = seq.start_pos + i + 1;
        for (int hd = 0; hd < heads; ++hd)
          Softmax(&probs_[off + static_cast<size_t>(hd) * ctx], ctx);
        off += static_cast<size_t>(heads) * ctx;
      }
    }
  }
  tp.comm->AllGather(me, probs_, &all_probs_, rec, "mla_tp_probs", layer);
  assert(all_probs_.size() == static_cast<size_t>(ctx_all) * heads);

  // Every rank: its columns of olat for every token, sent to the token's home.
  const int c0 = me * blk, ncol = OutEnd(me) - c0;
  const int orow = heads * ncol;
  for (int r = 0; r < parts; ++r) send_[r].assign(static_cast<size_t>(tp.rows_of(r)) * orow, 0.0f);
  if (total > 0) {
    SpanRecorder::Scope s(rec, "mla_pv", layer, total, 2 * ctx_all * heads * ncol,
                          kF * (ctx_all * (ncol + heads) + static_cast<int64_t>(total) * orow));
    const KvPool& kv_pool = *pool;
    size_t off = 0;
    for (size_t k = 0; k < tp.all.size(); ++k) {
      const SeqRows& seq = tp.all[k];
      const int home = tp.home[k];
      for (int i = 0; i < seq.n; ++i) {
        const int ctx = seq.start_pos + i + 1;
        const float* p = &all_probs_[off];
        off += static_cast<size_t>(heads) * ctx;
        if (ncol == 0) continue;
        float* oi = &send_[home][static_cast<size_t>(seq.row + i - tp.home_row[home]) * orow];
        for (int j = 0; j < ctx; ++j) {
          const float* c = kv_pool.Latent(seq.pages[j / ps], kv_layer, j % ps);
          for (int hd = 0; hd < heads; ++hd) {
            Axpy(p[static_cast<size_t>(hd) * ctx + j], c, oi + hd * ncol, ncol);
          }
        }
      }
    }
  }
  tp.comm->AllToAll(me, send_, &recv_, rec, "mla_tp_olat", layer);

  // Home: the latent outputs back together, then W_uv, gate and o_proj
  // exactly as Forward.
  if (tokens == 0) return;
  {
    SpanRecorder::Scope s(
        rec, "mla_lift", layer, tokens, 2 * t64 * heads * rank * vdim,
        kF * (static_cast<int64_t>(rank) * heads * vdim + t64 * heads * (rank + vdim)));
    olat_.resize(static_cast<size_t>(tokens) * heads * rank);
    for (int r = 0; r < parts; ++r) {
      const int rc0 = r * blk, rn = OutEnd(r) - rc0;
      assert(recv_[r].size() == static_cast<size_t>(tokens) * heads * rn);
      if (rn == 0) continue;
      for (int i = 0; i < tokens; ++i) {
        for (int hd = 0; hd < heads; ++hd) {
          std::memcpy(&olat_[(static_cast<size_t>(i) * heads + hd) * rank + rc0],
                      &recv_[r][(static_cast<size_t>(i) * heads + hd) * rn], rn * kF);
        }
      }
    }
    Lift(w, tokens);
  }
  OProj(w, layer, x, tokens, out, rec);
}

}  // namespace sy::engine
