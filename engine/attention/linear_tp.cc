// File: engine/attention/linear_tp.cc
//
// LinearAttention::ForwardTp (linear_attention.h, tp_batch.h): KDA / GLA with
// attention tensor parallel over heads. The stages are Forward's
// (Project, ConvNormCore, Out in linear_attention.cc); this file only moves
// rows between them:
//
//   scatter  home d -> rank r, per token of d: [q_r | k_r | v_r | g_r | beta_r]
//            (4 dl + heads/P floats; x_r = the channels of rank r's heads)
//   gather   rank r -> home d, per token of d: o_r (dl floats)
//
// Both are one Communicator::AllToAll; a rank's message to itself rides in
// the same call. Received blocks land in the global packing (home-major).
#include <cassert>
#include <cstring>

#include "engine/attention/linear_attention.h"
#include "engine/attention/linear_kernels.h"

namespace sy::engine {

using namespace linear_internal;  // NOLINT(build/namespaces): the layer's own helpers

namespace {
constexpr size_t kF = sizeof(float);
}  // namespace

void LinearAttention::ForwardTp(const LinearAttnWeights& w, int state_layer, int layer,
                                const float* x, int tokens, const TpBatch& tp, StatePool* pool,
                                float* out, SpanRecorder* rec) {
  const int parts = tp.parts(), nh = config_.heads;
  assert(nh % parts == 0);
  assert(pool->shards() == parts);
  assert(tokens == tp.rows_of(tp.rank));
  const Heads hb{tp.rank * (nh / parts), nh / parts};
  if (tokens > 0) Project(w, layer, x, tokens, rec);
  Scatter(tp, tokens, hb, layer, rec);
  ConvNormCore(w, state_layer, layer, hb, tp.total_rows(), tp.all, tbeta_.data(), pool, rec);
  Gather(tp, tokens, hb, layer, rec);
  const size_t dd = static_cast<size_t>(nh) * config_.linear_head_dim;
  if (tokens > 0) Out(w, layer, tokens, proj_.data() + tokens * dd, static_cast<int>(dd), out, rec);
}

void LinearAttention::Scatter(const TpBatch& tp, int tokens, Heads hb, int layer,
                              SpanRecorder* rec) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int parts = tp.parts(), nh = config_.heads, d = config_.linear_head_dim;
  const size_t dd = static_cast<size_t>(nh) * d, dl = static_cast<size_t>(hb.n) * d;
  const size_t nb = kda ? hb.n : 0;  // beta floats per token (GLA has none)
  const size_t width = 4 * dl + nb, rows = static_cast<size_t>(tokens);
  send_.resize(parts);
  for (int r = 0; r < parts; ++r) {
    std::vector<float>& buf = send_[r];
    buf.resize(rows * width);
    for (size_t t = 0; t < rows; ++t) {
      float* dst = buf.data() + t * width;
      for (size_t part = 0; part < 4; ++part) {
        std::memcpy(dst + part * dl, proj_.data() + (part * rows + t) * dd + r * dl, dl * kF);
      }
      if (nb > 0) std::memcpy(dst + 4 * dl, beta_.data() + t * nh + r * nb, nb * kF);
    }
  }
  tp.comm->AllToAll(tp.rank, send_, &recv_, rec, "linear_tp_scatter", layer);

  const size_t total = static_cast<size_t>(tp.total_rows()), cs = 5 * dl;
  Grow(&core_, total * cs);
  Grow(&tbeta_, total * hb.n);
  for (int home = 0; home < parts; ++home) {
    const std::vector<float>& buf = recv_[home];
    const size_t n = static_cast<size_t>(tp.rows_of(home)), row0 = tp.home_row[home];
    assert(buf.size() == n * width);
    for (size_t i = 0; i < n; ++i) {
      const float* src = buf.data() + i * width;
      std::memcpy(core_.data() + (row0 + i) * cs, src, 4 * dl * kF);
      if (nb > 0) std::memcpy(tbeta_.data() + (row0 + i) * nb, src + 4 * dl, nb * kF);
    }
  }
}

void LinearAttention::Gather(const TpBatch& tp, int tokens, Heads hb, int layer,
                             SpanRecorder* rec) {
  const int parts = tp.parts(), d = config_.linear_head_dim;
  const size_t dd = static_cast<size_t>(config_.heads) * d, dl = static_cast<size_t>(hb.n) * d;
  const size_t cs = 5 * dl, rows = static_cast<size_t>(tokens);
  send_.resize(parts);
  for (int home = 0; home < parts; ++home) {
    std::vector<float>& buf = send_[home];
    const size_t n = static_cast<size_t>(tp.rows_of(home)), row0 = tp.home_row[home];
    buf.resize(n * dl);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(buf.data() + i * dl, core_.data() + (row0 + i) * cs + 4 * dl, dl * kF);
    }
  }
  tp.comm->AllToAll(tp.rank, send_, &recv_, rec, "linear_tp_gather", layer);

  // Rank r's heads are columns [r dl, (r + 1) dl) of the home's o rows,
  // which go to proj_'s second block (Out writes the first).
  Grow(&proj_, 2 * rows * dd);
  float* o = proj_.data() + rows * dd;
  for (int r = 0; r < parts; ++r) {
    const std::vector<float>& buf = recv_[r];
    assert(buf.size() == rows * dl);
    for (size_t t = 0; t < rows; ++t) {
      std::memcpy(o + t * dd + r * dl, buf.data() + t * dl, dl * kF);
    }
  }
}

}  // namespace sy::engine
