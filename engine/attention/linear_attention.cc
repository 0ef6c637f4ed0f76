#include "engine/attention/linear_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <utility>

#include "engine/attention/linear_kernels.h"
#include "engine/model/gemm.h"

namespace sy::engine {

using namespace linear_internal;  // NOLINT(build/namespaces): this file's own helpers

namespace {
constexpr int64_t kF = sizeof(float);

// Tokens after which `sq` snapshots into its checkpoint slot; 0 for none.
int CheckpointAt(const SeqRows& sq) { return sq.checkpoint_slot >= 0 ? sq.checkpoint_at : 0; }
}  // namespace

LinearAttention::LinearAttention(const ModelConfig& config, LinearAttentionOptions options)
    : config_(config), options_(options) {
  assert(config.hybrid());
  assert(options.chunk >= 1);
}

void LinearAttention::Forward(const LinearAttnWeights& w, int state_layer, int layer,
                              const float* x, int tokens, std::span<const SeqRows> seqs,
                              StatePool* pool, float* out, SpanRecorder* rec) {
  if (tokens <= 0 || seqs.empty()) return;
  const int nh = config_.heads, dd = nh * config_.linear_head_dim, cs = 5 * dd;
  const size_t rows = static_cast<size_t>(tokens);
  Project(w, layer, x, tokens, rec);
  // The core rows of all heads: q | k | v | g from the projections' blocks.
  Grow(&core_, rows * cs);
  for (size_t t = 0; t < rows; ++t) {
    for (int part = 0; part < 4; ++part) {
      std::memcpy(core_.data() + t * cs + part * dd, proj_.data() + (part * rows + t) * dd,
                  dd * kF);
    }
  }
  ConvNormCore(w, state_layer, layer, Heads{0, nh}, tokens, seqs, beta_.data(), pool, rec);
  Out(w, layer, tokens, core_.data() + 4 * dd, cs, out, rec);
}

void LinearAttention::Project(const LinearAttnWeights& w, int layer, const float* x, int tokens,
                              SpanRecorder* rec) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int h = config_.hidden, nh = config_.heads, dd = nh * config_.linear_head_dim;
  const int64_t t64 = tokens;
  const size_t rows = static_cast<size_t>(tokens);
  Grow(&proj_, rows * 4 * dd);
  Grow(&gate_, rows * 2 * dd);
  Grow(&beta_, rows * nh);
  const int64_t cols = 5LL * dd + (kda ? nh : 0);
  SpanRecorder::Scope s(rec, "linear_proj", layer, t64, 2 * t64 * h * cols,
                        kF * (h * cols + t64 * (h + cols)));
  float* raw = proj_.data();
  Gemm(x, w.q.data(), raw, tokens, h, dd);
  Gemm(x, w.k.data(), raw + rows * dd, tokens, h, dd);
  Gemm(x, w.v.data(), raw + 2 * rows * dd, tokens, h, dd);
  Gemm(x, w.f.data(), gate_.data(), tokens, h, dd);
  Gemm(x, w.g.data(), gate_.data() + rows * dd, tokens, h, dd);
  if (kda) Gemm(x, w.b.data(), beta_.data(), tokens, h, nh);
  Gates(w, tokens);
}

void LinearAttention::ConvNormCore(const LinearAttnWeights& w, int state_layer, int layer, Heads hb,
                                   int rows, std::span<const SeqRows> seqs, const float* beta,
                                   StatePool* pool, SpanRecorder* rec) {
  if (rows <= 0 || seqs.empty()) return;
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int d = config_.linear_head_dim, dl = hb.n * d, cs = 5 * dl;
  const int kw = kda ? config_.conv_kernel : 0;
  const int hist = std::max(kw - 1, 0);  // conv state rows
  const int64_t t64 = rows;
  const int64_t state = static_cast<int64_t>(hb.n) * d * d;
  assert(pool->state_floats() == state);
  assert(hist == 0 || pool->conv_floats() == 3LL * hist * dl);

  for (const SeqRows& sq : seqs) {
    assert(sq.state_slot >= 0 && sq.state_slot < pool->storage_slots());
    assert(sq.row >= 0 && sq.row + sq.n <= rows);
    assert(sq.checkpoint_slot < 0 ||
           (sq.checkpoint_slot < pool->storage_slots() && sq.checkpoint_slot != sq.state_slot &&
            sq.checkpoint_at >= 1 && sq.checkpoint_at <= sq.n));
    if (sq.start_pos != 0) continue;
    // A fresh sequence: the slot may hold a previous owner's state.
    float* st = pool->State(sq.state_slot, state_layer);
    std::fill(st, st + state, 0.0f);
    if (hist > 0) {
      float* cv = pool->Conv(sq.state_slot, state_layer);
      std::fill(cv, cv + pool->conv_floats(), 0.0f);
    }
  }

  if (kda) {
    const int64_t ch = 3LL * dl;
    SpanRecorder::Scope s(rec, "short_conv", layer, t64, t64 * ch * (2 * kw + 8),
                          kF * (ch * kw + 2 * t64 * ch + 2LL * hist * ch * seqs.size()));
    ShortConv(w, state_layer, hb, seqs, pool);
    NormalizeQk(hb, 0, rows);
  }

  // The core, grouped by form so a mixed step records one span per form.
  for (int pass = 0; pass < 2; ++pass) {
    const bool chunked = pass == 0;
    int64_t n_tok = 0, n_seq = 0, n_snap = 0;
    for (const SeqRows& sq : seqs) {
      if (sq.n > 0 && UsesChunked(sq) == chunked) {
        n_tok += sq.n;
        ++n_seq;
        if (CheckpointAt(sq) > 0) ++n_snap;
      }
    }
    if (n_seq == 0) continue;
    const char* name =
        kda ? (chunked ? "kda_chunk" : "kda_recurrent") : (chunked ? "gla_chunk" : "gla_recurrent");
    // Recurrent: ~4 (KDA) or 3 (GLA) d x d passes of 2 FLOPs per token and
    // head. Chunked: 3 d x d GEMMs per token plus ~3 C x d of intra-chunk work.
    const int64_t per_tok = chunked ? 2LL * hb.n * (3LL * d * d + 3LL * options_.chunk * d)
                                    : 2LL * hb.n * (kda ? 4 : 3) * d * d;
    SpanRecorder::Scope s(rec, name, layer, n_tok, n_tok * per_tok,
                          kF * (2 * state * n_seq + state * n_snap + n_tok * (cs + hb.n)));
    for (const SeqRows& sq : seqs) {
      if (sq.n <= 0 || UsesChunked(sq) != chunked) continue;
      if (!kda) NormalizeQk(hb, sq.row, sq.n);  // GLA: only the q scale
      RunCore(sq, state_layer, hb, beta, chunked, pool);
    }
  }
}

void LinearAttention::Out(const LinearAttnWeights& w, int layer, int tokens, const float* o,
                          int o_stride, float* out, SpanRecorder* rec) {
  const int h = config_.hidden, nh = config_.heads, d = config_.linear_head_dim, dd = nh * d;
  const int64_t t64 = tokens;
  SpanRecorder::Scope s(rec, "linear_out", layer, t64, t64 * (8LL * dd + 2LL * dd * h),
                        kF * (static_cast<int64_t>(dd) * h + t64 * (3LL * dd + 2 * h)));
  // The raw projections are dead by now; o is core_ (EP) or proj_'s second
  // block (TP), never this first one.
  float* ob = proj_.data();
  float* ogate = gate_.data() + static_cast<size_t>(tokens) * dd;
  SigmoidInPlace(ogate, tokens * dd);
  for (int t = 0; t < tokens; ++t) {
    const float* orow = o + static_cast<size_t>(t) * o_stride;
    const float* grow = ogate + static_cast<size_t>(t) * dd;
    float* dst = ob + static_cast<size_t>(t) * dd;
    for (int hd = 0; hd < nh; ++hd) {
      const float* oh = orow + hd * d;
      const float inv = 1.0f / std::sqrt(Dot(oh, oh, d) / d + config_.rms_eps);
      for (int c = 0; c < d; ++c) {
        dst[hd * d + c] = oh[c] * inv * w.o_norm[c] * grow[hd * d + c];
      }
    }
  }
  Gemm(ob, w.o.data(), out, tokens, dd, h, /*accumulate=*/true);
}

bool LinearAttention::UsesChunked(const SeqRows& seq) const {
  return seq.n > 1 && options_.prefill == PrefillMode::kChunked;
}

void LinearAttention::ShortConv(const LinearAttnWeights& w, int state_layer, Heads hb,
                                std::span<const SeqRows> seqs, StatePool* pool) {
  const int d = config_.linear_head_dim, dd = config_.heads * d;
  const int dl = hb.n * d, ch = 3 * dl, cs = 5 * dl, segs = 3 * hb.n;
  const int kw = config_.conv_kernel, hist = kw - 1;
  int max_n = 0;
  for (const SeqRows& sq : seqs) max_n = std::max(max_n, sq.n);
  Grow(&conv_, static_cast<size_t>(kw) * ch + static_cast<size_t>(hist + max_n) * ch);
  // Tap-major weights of this block's channels (q, k, v: dl each, at global
  // channel part * D + h0 * d + j) so the inner loop runs over contiguous channels.
  float* taps = conv_.data();                        // [K x 3dl]
  float* ext = taps + static_cast<size_t>(kw) * ch;  // [(K-1+n) x 3dl]: state rows, then inputs
  for (int part = 0; part < 3; ++part) {
    for (int j = 0; j < dl; ++j) {
      const float* src = w.conv.data() + static_cast<size_t>(part * dd + hb.h0 * d + j) * kw;
      for (int i = 0; i < kw; ++i) taps[static_cast<size_t>(i) * ch + part * dl + j] = src[i];
    }
  }
  for (const SeqRows& sq : seqs) {
    if (sq.n <= 0) continue;
    float* state = hist > 0 ? pool->Conv(sq.state_slot, state_layer) : nullptr;
    if (hist > 0) std::memcpy(ext, state, static_cast<size_t>(hist) * ch * kF);
    for (int t = 0; t < sq.n; ++t) {
      std::memcpy(ext + static_cast<size_t>(hist + t) * ch,
                  core_.data() + static_cast<size_t>(sq.row + t) * cs, ch * kF);
    }
    // One head's d channels of q, k or v per call: every channel sees the
    // same vector code whatever block of heads this is.
    for (int t = 0; t < sq.n; ++t) {
      float* y = core_.data() + static_cast<size_t>(sq.row + t) * cs;
      for (int sg = 0; sg < segs; ++sg) {
        float* ys = y + static_cast<size_t>(sg) * d;
        std::fill(ys, ys + d, 0.0f);
        for (int i = 0; i < kw; ++i) {
          const float* tap = taps + static_cast<size_t>(i) * ch + sg * d;
          const float* u = ext + static_cast<size_t>(t + i) * ch + sg * d;
          MulAdd(tap, u, ys, d);
        }
        SiluInPlace(ys, d);
      }
    }
    // The conv state after m tokens is the last K-1 inputs before position
    // start_pos + m: ext rows [m, m + hist).
    if (const int m = CheckpointAt(sq); hist > 0 && m > 0) {
      std::memcpy(pool->Conv(sq.checkpoint_slot, state_layer), ext + static_cast<size_t>(m) * ch,
                  static_cast<size_t>(hist) * ch * kF);
    }
    if (hist > 0)
      std::memcpy(state, ext + static_cast<size_t>(sq.n) * ch, static_cast<size_t>(hist) * ch * kF);
  }
}

void LinearAttention::NormalizeQk(Heads hb, int from, int n) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int d = config_.linear_head_dim, dl = hb.n * d, cs = 5 * dl;
  const float qscale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int t = from; t < from + n; ++t) {
    float* r = core_.data() + static_cast<size_t>(t) * cs;
    for (int hd = 0; hd < hb.n; ++hd) {
      float* qh = r + hd * d;
      float* kh = r + dl + hd * d;
      float qn = qscale, kn = 1.0f;
      if (kda) {
        qn /= std::sqrt(Dot(qh, qh, d) + 1e-6f);
        kn /= std::sqrt(Dot(kh, kh, d) + 1e-6f);
      }
      for (int c = 0; c < d; ++c) {
        qh[c] *= qn;
        kh[c] *= kn;
      }
    }
  }
}

void LinearAttention::Gates(const LinearAttnWeights& w, int tokens) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const bool lower_bound = kda && config_.kda_has_lower_bound;
  const float lb = config_.kda_lower_bound;
  const int nh = config_.heads, d = config_.linear_head_dim, dd = nh * d;
  float* g = proj_.data() + 3 * static_cast<size_t>(tokens) * dd;
  for (int t = 0; t < tokens; ++t) {
    const float* f = gate_.data() + static_cast<size_t>(t) * dd;
    float* gt = g + static_cast<size_t>(t) * dd;
    for (int hd = 0; hd < nh; ++hd) {
      const float a = std::exp(w.a_log[hd]);
      const float* z = f + hd * d;
      const float* dt = w.dt_bias.data() + hd * d;
      float* gh = gt + hd * d;
      if (lower_bound) {
        for (int c = 0; c < d; ++c) gh[c] = a * (z[c] + dt[c]);
        SigmoidInPlace(gh, d);
        for (int c = 0; c < d; ++c) gh[c] *= lb;
      } else {
        for (int c = 0; c < d; ++c) gh[c] = -a * Softplus(z[c] + dt[c]);
      }
    }
  }
  if (kda) SigmoidInPlace(beta_.data(), tokens * nh);
}

void LinearAttention::RunCore(const SeqRows& sq, int state_layer, Heads hb, const float* beta,
                              bool chunked, StatePool* pool) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int nl = hb.n, d = config_.linear_head_dim, dl = nl * d, cs = 5 * dl;
  float* state = pool->State(sq.state_slot, state_layer);
  // A checkpoint at m splits the rows into [0, m) and [m, n): the state
  // between the two calls is exactly the state after m tokens. The second
  // part keeps the seq's form; for the chunk-wise form it is another call
  // whose chunks start at row m.
  const int m = CheckpointAt(sq);
  float* snap = m > 0 ? pool->State(sq.checkpoint_slot, state_layer) : nullptr;
  const int split = m > 0 ? m : sq.n;
  for (int hd = 0; hd < nl; ++hd) {
    float* s = state + static_cast<size_t>(hd) * d * d;
    for (const auto& [from, count] : {std::pair{0, split}, std::pair{split, sq.n - split}}) {
      if (count == 0) continue;
      float* base = core_.data() + static_cast<size_t>(sq.row + from) * cs + hd * d;
      const float* q = base;
      const float* k = q + dl;
      const float* v = k + dl;
      const float* g = v + dl;
      float* o = base + 4 * dl;
      const float* b = beta + static_cast<size_t>(sq.row + from) * nl + hd;
      if (kda && chunked) {
        KdaChunked(q, k, v, g, b, nl, count, d, cs, options_.chunk, s, o, &chunk_scratch_);
      } else if (kda) {
        KdaRecurrent(q, k, v, g, b, nl, count, d, cs, s, o);
      } else if (chunked) {
        GlaChunked(q, k, v, g, count, d, cs, options_.chunk, s, o, &chunk_scratch_);
      } else {
        GlaRecurrent(q, k, v, g, count, d, cs, s, o);
      }
      if (snap != nullptr && from == 0) {
        std::memcpy(snap + static_cast<size_t>(hd) * d * d, s, static_cast<size_t>(d) * d * kF);
      }
    }
  }
}

}  // namespace sy::engine
