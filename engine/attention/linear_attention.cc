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
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int h = config_.hidden, nh = config_.heads, d = config_.linear_head_dim;
  const int dd = nh * d;  // D
  const int cs = 5 * dd;  // core row: q | k | v | g | o
  const int kw = kda ? config_.conv_kernel : 0;
  const int hist = std::max(kw - 1, 0);  // conv state rows
  const int64_t t64 = tokens;
  const size_t rows = static_cast<size_t>(tokens);
  Grow(&proj_, rows * 3 * dd);
  Grow(&gate_, rows * 2 * dd);
  Grow(&beta_, rows * nh);
  Grow(&o_, rows * cs);
  float* raw = proj_.data();        // pre-conv q, k, v: three [T x D] blocks
  float* fpre = gate_.data();       // x W_f [T x D]
  float* ogate = fpre + rows * dd;  // x W_g [T x D]
  float* core = o_.data();

  for (const SeqRows& sq : seqs) {
    assert(sq.state_slot >= 0 && sq.state_slot < pool->slots());
    assert(sq.checkpoint_slot < 0 ||
           (sq.checkpoint_slot < pool->slots() && sq.checkpoint_slot != sq.state_slot &&
            sq.checkpoint_at >= 1 && sq.checkpoint_at <= sq.n));
    if (sq.start_pos != 0) continue;
    // A fresh sequence: the slot may hold a previous owner's state.
    float* st = pool->State(sq.state_slot, state_layer);
    std::fill(st, st + static_cast<size_t>(nh) * d * d, 0.0f);
    if (hist > 0) {
      float* cv = pool->Conv(sq.state_slot, state_layer);
      std::fill(cv, cv + static_cast<size_t>(hist) * 3 * dd, 0.0f);
    }
  }

  {
    const int64_t cols = 5LL * dd + (kda ? nh : 0);
    SpanRecorder::Scope s(rec, "linear_proj", layer, t64, 2 * t64 * h * cols,
                          kF * (h * cols + t64 * (h + cols)));
    Gemm(x, w.q.data(), raw, tokens, h, dd);
    Gemm(x, w.k.data(), raw + rows * dd, tokens, h, dd);
    Gemm(x, w.v.data(), raw + 2 * rows * dd, tokens, h, dd);
    Gemm(x, w.f.data(), fpre, tokens, h, dd);
    Gemm(x, w.g.data(), ogate, tokens, h, dd);
    if (kda) Gemm(x, w.b.data(), beta_.data(), tokens, h, nh);
    Gates(w, tokens);
    if (!kda) {
      for (int t = 0; t < tokens; ++t) {
        for (int part = 0; part < 3; ++part) {
          std::memcpy(core + static_cast<size_t>(t) * cs + part * dd, raw + (part * rows + t) * dd,
                      dd * kF);
        }
      }
      NormalizeQk(tokens);
    }
  }

  if (kda) {
    const int64_t ch = 3LL * dd;
    SpanRecorder::Scope s(rec, "short_conv", layer, t64, t64 * ch * (2 * kw + 8),
                          kF * (ch * kw + 2 * t64 * ch + 2LL * hist * ch * seqs.size()));
    ShortConv(w, state_layer, tokens, seqs, pool);
    NormalizeQk(tokens);
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
    const int64_t state = static_cast<int64_t>(nh) * d * d;
    // Recurrent: ~4 (KDA) or 3 (GLA) d x d passes of 2 FLOPs per token and
    // head. Chunked: 3 d x d GEMMs per token plus ~3 C x d of intra-chunk work.
    const int64_t per_tok = chunked ? 2LL * nh * (3LL * d * d + 3LL * options_.chunk * d)
                                    : 2LL * nh * (kda ? 4 : 3) * d * d;
    SpanRecorder::Scope s(rec, name, layer, n_tok, n_tok * per_tok,
                          kF * (2 * state * n_seq + state * n_snap + n_tok * (cs + nh)));
    for (const SeqRows& sq : seqs) {
      if (sq.n > 0 && UsesChunked(sq) == chunked) RunCore(sq, state_layer, chunked, pool);
    }
  }

  {
    SpanRecorder::Scope s(rec, "linear_out", layer, t64, t64 * (8LL * dd + 2LL * dd * h),
                          kF * (static_cast<int64_t>(dd) * h + t64 * (3LL * dd + 2 * h)));
    float* ob = raw;  // the pre-conv projections are dead by now
    SigmoidInPlace(ogate, tokens * dd);
    for (int t = 0; t < tokens; ++t) {
      const float* orow = core + static_cast<size_t>(t) * cs + 4 * dd;
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
}

bool LinearAttention::UsesChunked(const SeqRows& seq) const {
  return seq.n > 1 && options_.prefill == PrefillMode::kChunked;
}

void LinearAttention::ShortConv(const LinearAttnWeights& w, int state_layer, int tokens,
                                std::span<const SeqRows> seqs, StatePool* pool) {
  const int dd = config_.heads * config_.linear_head_dim, ch = 3 * dd, cs = 5 * dd;
  const int kw = config_.conv_kernel, hist = kw - 1;
  const size_t rows = static_cast<size_t>(tokens);
  int max_n = 0;
  for (const SeqRows& sq : seqs) max_n = std::max(max_n, sq.n);
  Grow(&conv_, static_cast<size_t>(kw) * ch + static_cast<size_t>(hist + max_n) * ch);
  // Tap-major weights so the inner loop runs over contiguous channels.
  float* taps = conv_.data();                        // [K x 3D]
  float* ext = taps + static_cast<size_t>(kw) * ch;  // [(K-1+n) x 3D]: state rows, then inputs
  for (int c = 0; c < ch; ++c) {
    for (int i = 0; i < kw; ++i)
      taps[static_cast<size_t>(i) * ch + c] = w.conv[static_cast<size_t>(c) * kw + i];
  }
  const float* raw = proj_.data();
  for (const SeqRows& sq : seqs) {
    if (sq.n <= 0) continue;
    float* state = hist > 0 ? pool->Conv(sq.state_slot, state_layer) : nullptr;
    if (hist > 0) std::memcpy(ext, state, static_cast<size_t>(hist) * ch * kF);
    for (int t = 0; t < sq.n; ++t) {
      float* dst = ext + static_cast<size_t>(hist + t) * ch;
      for (int part = 0; part < 3; ++part) {
        std::memcpy(dst + part * dd, raw + (part * rows + sq.row + t) * dd, dd * kF);
      }
    }
    for (int t = 0; t < sq.n; ++t) {
      float* y = o_.data() + static_cast<size_t>(sq.row + t) * cs;
      std::fill(y, y + ch, 0.0f);
      for (int i = 0; i < kw; ++i) {
        const float* tap = taps + static_cast<size_t>(i) * ch;
        const float* u = ext + static_cast<size_t>(t + i) * ch;
        MulAdd(tap, u, y, ch);
      }
      SiluInPlace(y, ch);
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

void LinearAttention::NormalizeQk(int tokens) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int nh = config_.heads, d = config_.linear_head_dim, dd = nh * d, cs = 5 * dd;
  const float qscale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int t = 0; t < tokens; ++t) {
    float* r = o_.data() + static_cast<size_t>(t) * cs;
    for (int hd = 0; hd < nh; ++hd) {
      float* qh = r + hd * d;
      float* kh = r + dd + hd * d;
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
  const int nh = config_.heads, d = config_.linear_head_dim, dd = nh * d, cs = 5 * dd;
  for (int t = 0; t < tokens; ++t) {
    const float* f = gate_.data() + static_cast<size_t>(t) * dd;
    float* gt = o_.data() + static_cast<size_t>(t) * cs + 3 * dd;
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

void LinearAttention::RunCore(const SeqRows& sq, int state_layer, bool chunked, StatePool* pool) {
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  const int nh = config_.heads, d = config_.linear_head_dim, dd = nh * d, cs = 5 * dd;
  assert(sq.state_slot >= 0 && sq.state_slot < pool->slots());
  float* state = pool->State(sq.state_slot, state_layer);
  // A checkpoint at m splits the rows into [0, m) and [m, n): the state
  // between the two calls is exactly the state after m tokens. The second
  // part keeps the seq's form; for the chunk-wise form it is another call
  // whose chunks start at row m.
  const int m = CheckpointAt(sq);
  float* snap = m > 0 ? pool->State(sq.checkpoint_slot, state_layer) : nullptr;
  const int split = m > 0 ? m : sq.n;
  for (int hd = 0; hd < nh; ++hd) {
    float* s = state + static_cast<size_t>(hd) * d * d;
    for (const auto& [from, count] : {std::pair{0, split}, std::pair{split, sq.n - split}}) {
      if (count == 0) continue;
      float* base = o_.data() + static_cast<size_t>(sq.row + from) * cs + hd * d;
      const float* q = base;
      const float* k = q + dd;
      const float* v = k + dd;
      const float* g = v + dd;
      float* o = base + 4 * dd;
      const float* b = beta_.data() + static_cast<size_t>(sq.row + from) * nh + hd;
      if (kda && chunked) {
        KdaChunked(q, k, v, g, b, nh, count, d, cs, options_.chunk, s, o, &chunk_scratch_);
      } else if (kda) {
        KdaRecurrent(q, k, v, g, b, nh, count, d, cs, s, o);
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
