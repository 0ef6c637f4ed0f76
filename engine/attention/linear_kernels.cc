// File: engine/attention/linear_kernels.cc
//
// The recurrence and chunk-wise cores of KDA/GLA and their vector helpers
// (linear_kernels.h); the layer around them is linear_attention.cc.
#include "engine/attention/linear_kernels.h"

#include "engine/attention/linear_attention.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/model/gemm.h"

namespace sy::engine {

namespace {

constexpr int64_t kF = sizeof(float);
// Rows of one intra-chunk block: products between blocks go through GEMMs,
// the (triangular) diagonal blocks through a running product of decays.
constexpr int kBlock = 16;
// The recurrences keep their per-token vectors on the stack up to this head
// dim (Ling3's is 128) and fall back to the heap beyond it.
constexpr int kStackDim = 256;

float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void Grow(std::vector<float>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

// Per-token vectors of the recurrences ([3 x d]): on the stack for usual d.
class TokenVectors {
 public:
  explicit TokenVectors(int d) {
    if (d > kStackDim) heap_.resize(3 * static_cast<size_t>(d));
    data_ = d > kStackDim ? heap_.data() : stack_;
  }
  float* get(int i, int d) { return data_ + static_cast<size_t>(i) * d; }

 private:
  float stack_[3 * kStackDim];
  std::vector<float> heap_;
  float* data_;
};

// The element-wise loops of the recurrences and of the chunk-wise form's
// decay products, compiled twice (AVX2 and baseline) and picked at load time.
#define SY_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

// Running decay products stay positive; below this they are flushed to zero
// (they only ever scale O(1) values) so no later product runs on denormals.
constexpr float kTinyDecay = 1e-30f;

// out[i] = a[i] * b[i], flushed to zero below kTinyDecay. out may alias a or b.
SY_VECTOR_CLONES void DecayProduct(const float* a, const float* b, float* out, int n) {
  for (int i = 0; i < n; ++i) {
    const float p = a[i] * b[i];
    out[i] = p < kTinyDecay ? 0.0f : p;
  }
}

// y[i] = x[i] * s[i]. y may alias x.
SY_VECTOR_CLONES void Mul(const float* x, const float* s, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = x[i] * s[i];
}

// rows [rows x d] *= e per column: one token's decay of earlier keys.
SY_VECTOR_CLONES void DecayRows(const float* e, float* rows, int n_rows, int d) {
  for (int j = 0; j < n_rows; ++j) {
    float* r = rows + static_cast<size_t>(j) * d;
    for (int c = 0; c < d; ++c) r[c] *= e[c];
  }
}

// KDA pass 1 over a state row: s *= e, then acc += k * s.
SY_VECTOR_CLONES void DecayRowDot(float e, float k, float* s, float* acc, int n) {
  for (int i = 0; i < n; ++i) {
    s[i] *= e;
    acc[i] += k * s[i];
  }
}

// KDA pass 2 over a state row: s += k * u, then o += q * s.
SY_VECTOR_CLONES void UpdateRowOut(float k, const float* u, float q, float* s, float* o, int n) {
  for (int i = 0; i < n; ++i) {
    s[i] += k * u[i];
    o[i] += q * s[i];
  }
}

// GLA over a state row: s = e * s + k * v, then o += q * s.
SY_VECTOR_CLONES void GlaRow(float e, float k, const float* v, float q, float* s, float* o, int n) {
  for (int i = 0; i < n; ++i) {
    s[i] = e * s[i] + k * v[i];
    o[i] += q * s[i];
  }
}

// y[i] += a[i] * b[i].
SY_VECTOR_CLONES void MulAdd(const float* a, const float* b, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a[i] * b[i];
}

#undef SY_VECTOR_CLONES

bool HasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// exp over 8 lanes: Cephes' expf (range reduction by ln 2 in two parts, a
// degree-6 polynomial, 2^n through the exponent bits), within 1e-7 relative
// of expf. Inputs are clamped to [-87, 88], so far-negative log-decays give
// ~1e-38 instead of a denormal and far-positive inputs stay finite.
__attribute__((target("avx2,fma"))) void ExpAvx2(const float* x, float* y, int n) {
  const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.0f);
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 c1 = _mm256_set1_ps(0.693359375f), c2 = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 p0 = _mm256_set1_ps(1.9875691500e-4f), p1 = _mm256_set1_ps(1.3981999507e-3f),
               p2 = _mm256_set1_ps(8.3334519073e-3f), p3 = _mm256_set1_ps(4.1665795894e-2f),
               p4 = _mm256_set1_ps(1.6666665459e-1f), p5 = _mm256_set1_ps(5.0000001201e-1f),
               one = _mm256_set1_ps(1.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_max_ps(_mm256_min_ps(_mm256_loadu_ps(x + i), hi), lo);
    const __m256 t =
        _mm256_round_ps(_mm256_mul_ps(v, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(t, c1, v);
    r = _mm256_fnmadd_ps(t, c2, r);
    __m256 p = _mm256_fmadd_ps(p0, r, p1);
    p = _mm256_fmadd_ps(p, r, p2);
    p = _mm256_fmadd_ps(p, r, p3);
    p = _mm256_fmadd_ps(p, r, p4);
    p = _mm256_fmadd_ps(p, r, p5);
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, one));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(t), _mm256_set1_epi32(127)), 23);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

// y = exp(x); y may alias x.
void Exp(const float* x, float* y, int n) {
  if (HasAvx2Fma()) {
    ExpAvx2(x, y, n);
    return;
  }
  for (int i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

// The gates, tile by tile so exp runs vectorised over a stack buffer.
constexpr int kTile = 256;

// x = sigmoid(x).
void SigmoidInPlace(float* x, int n) {
  float e[kTile];
  for (int i0 = 0; i0 < n; i0 += kTile) {
    const int m = std::min(kTile, n - i0);
    for (int i = 0; i < m; ++i) e[i] = -x[i0 + i];
    Exp(e, e, m);
    for (int i = 0; i < m; ++i) x[i0 + i] = 1.0f / (1.0f + e[i]);
  }
}

// x = x * sigmoid(x).
void SiluInPlace(float* x, int n) {
  float e[kTile];
  for (int i0 = 0; i0 < n; i0 += kTile) {
    const int m = std::min(kTile, n - i0);
    for (int i = 0; i < m; ++i) e[i] = -x[i0 + i];
    Exp(e, e, m);
    for (int i = 0; i < m; ++i) x[i0 + i] = x[i0 + i] / (1.0f + e[i]);
  }
}

// The chunk-wise form of both rules over one head. Within a chunk of L tokens
// starting from state S0, with G_t the in-chunk cumulative log-decay:
//   P[t,j] = sum_c q_t[c] k_j[c] exp(G_t[c] - G_j[c])            (j <= t)
//   KDA: A[t,j] = beta_t sum_c k_t[c] k_j[c] exp(G_t[c] - G_j[c]) (j < t)
//        [W | U] = (I + A)^-1 [beta (k ⊙ exp G) | beta v],  Delta = U - W S0
//   GLA: Delta = V
//   o_t   = (q_t ⊙ exp G_t)^T S0 + sum_j P[t,j] Delta_j
//   S_end = Diag(exp G_L) S0 + sum_j (k_j ⊙ exp(G_L - G_j)) Delta_j^T
// (Derivation: write S_t = D_t S_{t-1} + k_t u_t^T; unrolling D_t S_{t-1}
// inside the chunk gives u_t = beta_t (v_t - S0^T(k_t ⊙ exp G_t)) -
// sum_{j<t} A[t,j] u_j, i.e. (I + A) U = ..., so u = Delta.)
// Every exp(G_t - G_j), t >= j, is a running product of the per-token decays
// exp(g) over (j, t], each <= 1, exactly what the recurrence multiplies by;
// it is never split into exp(G_t) / exp(G_j) (G reaches -320 in a chunk with
// the -5 lower bound). Between blocks of kBlock rows the P and A entries
// factor through the last token r of the earlier blocks,
// exp(G_t - G_r) exp(G_r - G_j), so they are GEMMs; inside a block they are
// dot products against keys decayed step by step.
template <bool kKda>
void ChunkedCore(const float* q, const float* k, const float* v, const float* g, const float* beta,
                 int beta_stride, int tokens, int d, int stride, int chunk, float* s, float* o,
                 std::vector<float>* scratch) {
  assert(chunk >= 1 && d >= 1);
  const int cmax = std::max(1, std::min(chunk, tokens));
  const int bmax = std::min(kBlock, cmax);
  const size_t cd = static_cast<size_t>(cmax) * d, cc = static_cast<size_t>(cmax) * cmax;
  const size_t bd = static_cast<size_t>(bmax) * d;
  Grow(scratch, 8 * cd + 2 * cc + 3 * bd + d);
  float* ec = scratch->data();  // exp(g_t) [L x d]
  float* pf = ec + cd;          // exp(G_t): prefix products [L x d]
  float* p = pf + cd;           // P [L x L]
  float* a = p + cc;            // A [L x L]
  float* rhs = a + cc;          // [W | U] [L x 2d] (KDA)
  float* qt = rhs + 2 * cd;     // q ⊙ exp G [L x d]
  float* delta = qt + cd;       // [L x d]
  float* ob = delta + cd;       // [L x d]
  float* kr = ob + cd;   // k_j ⊙ exp(G_r - G_j) [L x d]; later (k ⊙ exp(G_L - G))^T [d x L]
  float* qs = kr + cd;   // q_t ⊙ exp(G_t - G_r) [block x d]
  float* ks = qs + bd;   // k_t ⊙ exp(G_t - G_r) [block x d]
  float* kd = ks + bd;   // in-block keys decayed to the current token [block x d]
  float* run = kd + bd;  // a running product [d]

  for (int t0 = 0; t0 < tokens; t0 += cmax) {
    const int len = std::min(cmax, tokens - t0);
    const size_t off = static_cast<size_t>(t0) * stride;
    const float* qc = q + off;
    const float* kc = k + off;
    const float* vc = v + off;
    auto row = [stride](const float* base, int t) {
      return base + static_cast<size_t>(t) * stride;
    };
    auto at = [d](float* base, int t) { return base + static_cast<size_t>(t) * d; };
    auto bt = [&](int t) { return kKda ? beta[static_cast<size_t>(t0 + t) * beta_stride] : 1.0f; };

    for (int t = 0; t < len; ++t) {
      Exp(row(g + off, t), at(ec, t), d);
      if (t == 0) {
        std::memcpy(pf, ec, d * kF);
      } else {
        DecayProduct(at(pf, t - 1), at(ec, t), at(pf, t), d);
      }
    }

    // P and A, block row by block row.
    std::fill(p, p + static_cast<size_t>(len) * len, 0.0f);
    if (kKda) std::fill(a, a + static_cast<size_t>(len) * len, 0.0f);
    for (int b0 = 0; b0 < len; b0 += bmax) {
      const int bn = std::min(bmax, len - b0);
      if (b0 > 0) {
        // Keys before the block, decayed to r = b0 - 1 (backward products).
        std::fill(run, run + d, 1.0f);
        for (int j = b0 - 1; j >= 0; --j) {
          if (j < b0 - 1) DecayProduct(run, at(ec, j + 1), run, d);
          Mul(row(kc, j), run, at(kr, j), d);
        }
        // Block rows decayed from r (forward products).
        for (int i = 0; i < bn; ++i) {
          const int t = b0 + i;
          if (i == 0) {
            std::memcpy(run, at(ec, t), d * kF);
          } else {
            DecayProduct(run, at(ec, t), run, d);
          }
          Mul(row(qc, t), run, at(qs, i), d);
          if (kKda) Mul(row(kc, t), run, at(ks, i), d);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bn, b0, d, 1.0f, qs, d, kr, d, 0.0f,
                    p + static_cast<size_t>(b0) * len, len);
        if (kKda) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bn, b0, d, 1.0f, ks, d, kr, d, 0.0f,
                      a + static_cast<size_t>(b0) * len, len);
        }
      }
      for (int i = 0; i < bn; ++i) {
        const int t = b0 + i;
        DecayRows(at(ec, t), kd, i, d);
        std::memcpy(at(kd, i), row(kc, t), d * kF);
        const float* qi = row(qc, t);
        float* prow = p + static_cast<size_t>(t) * len + b0;
        for (int j = 0; j <= i; ++j) prow[j] = Dot(qi, at(kd, j), d);
        if (kKda) {
          const float* ki = row(kc, t);
          float* arow = a + static_cast<size_t>(t) * len;
          for (int j = 0; j < i; ++j) arow[b0 + j] = Dot(ki, at(kd, j), d);
          const float b = bt(t);
          for (int j = 0; j < t; ++j) arow[j] *= b;
        }
      }
    }

    // Right-hand sides, then Delta.
    for (int t = 0; t < len; ++t) {
      Mul(row(qc, t), at(pf, t), at(qt, t), d);
      if (kKda) {
        const float b = bt(t);
        float* w = rhs + static_cast<size_t>(t) * 2 * d;
        const float* ki = row(kc, t);
        const float* vi = row(vc, t);
        const float* pt = at(pf, t);
        for (int c = 0; c < d; ++c) {
          w[c] = b * ki[c] * pt[c];
          w[d + c] = b * vi[c];
        }
      } else {
        std::memcpy(at(delta, t), row(vc, t), d * kF);
      }
    }
    if (kKda) {
      cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, len, 2 * d, 1.0f,
                  a, len, rhs, 2 * d);
      GemmLda(rhs, 2 * d, s, delta, len, d, d);  // W S0
      for (int t = 0; t < len; ++t) {
        const float* u = rhs + static_cast<size_t>(t) * 2 * d + d;
        float* dl = at(delta, t);
        for (int c = 0; c < d; ++c) dl[c] = u[c] - dl[c];
      }
    }

    // Outputs.
    Gemm(qt, s, ob, len, d, d);
    Gemm(p, delta, ob, len, len, d, /*accumulate=*/true);
    for (int t = 0; t < len; ++t) {
      std::memcpy(o + off + static_cast<size_t>(t) * stride, at(ob, t), d * kF);
    }

    // State: S_end = Diag(exp G_L) S0 + Kd^T Delta, Kd^T built transposed
    // from backward products.
    const float* pl = at(pf, len - 1);
    for (int c = 0; c < d; ++c) {
      float* srow = s + static_cast<size_t>(c) * d;
      const float e = pl[c];
      for (int j = 0; j < d; ++j) srow[j] *= e;
    }
    std::fill(run, run + d, 1.0f);
    for (int j = len - 1; j >= 0; --j) {
      if (j < len - 1) DecayProduct(run, at(ec, j + 1), run, d);
      const float* kj = row(kc, j);
      for (int c = 0; c < d; ++c) kr[static_cast<size_t>(c) * len + j] = kj[c] * run[c];
    }
    Gemm(kr, delta, s, d, len, d, /*accumulate=*/true);
  }
}

}  // namespace

namespace linear_internal {

float Softplus(float x) { return sy::engine::Softplus(x); }
void Grow(std::vector<float>* v, size_t n) { sy::engine::Grow(v, n); }
void SigmoidInPlace(float* x, int n) { sy::engine::SigmoidInPlace(x, n); }
void SiluInPlace(float* x, int n) { sy::engine::SiluInPlace(x, n); }
void MulAdd(const float* a, const float* b, float* y, int n) { sy::engine::MulAdd(a, b, y, n); }

}  // namespace linear_internal

void KdaRecurrent(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int beta_stride, int tokens, int d, int stride, float* s, float* o) {
  TokenVectors vecs(d);
  float* e = vecs.get(0, d);
  float* ks = vecs.get(1, d);
  float* u = vecs.get(2, d);
  for (int t = 0; t < tokens; ++t) {
    const size_t off = static_cast<size_t>(t) * stride;
    const float* qt = q + off;
    const float* kt = k + off;
    const float* vt = v + off;
    const float* gt = g + off;
    float* ot = o + off;
    Exp(gt, e, d);
    // Pass 1: S <- Diag(e) S, and ks = S^T k of the decayed state.
    std::fill(ks, ks + d, 0.0f);
    for (int c = 0; c < d; ++c) DecayRowDot(e[c], kt[c], s + static_cast<size_t>(c) * d, ks, d);
    // S += k (beta (v - S^T k))^T is (I - beta k k^T) S + beta k v^T.
    const float b = beta[static_cast<size_t>(t) * beta_stride];
    for (int j = 0; j < d; ++j) u[j] = b * (vt[j] - ks[j]);
    // Pass 2: the rank-1 update, and o = S^T q.
    std::fill(ot, ot + d, 0.0f);
    for (int c = 0; c < d; ++c)
      UpdateRowOut(kt[c], u, qt[c], s + static_cast<size_t>(c) * d, ot, d);
  }
}

void GlaRecurrent(const float* q, const float* k, const float* v, const float* g, int tokens, int d,
                  int stride, float* s, float* o) {
  TokenVectors vecs(d);
  float* e = vecs.get(0, d);
  for (int t = 0; t < tokens; ++t) {
    const size_t off = static_cast<size_t>(t) * stride;
    const float* qt = q + off;
    const float* kt = k + off;
    float* ot = o + off;
    Exp(g + off, e, d);
    std::fill(ot, ot + d, 0.0f);
    for (int c = 0; c < d; ++c)
      GlaRow(e[c], kt[c], v + off, qt[c], s + static_cast<size_t>(c) * d, ot, d);
  }
}

void KdaChunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                int beta_stride, int tokens, int d, int stride, int chunk, float* s, float* o,
                std::vector<float>* scratch) {
  ChunkedCore<true>(q, k, v, g, beta, beta_stride, tokens, d, stride, chunk, s, o, scratch);
}

void GlaChunked(const float* q, const float* k, const float* v, const float* g, int tokens, int d,
                int stride, int chunk, float* s, float* o, std::vector<float>* scratch) {
  ChunkedCore<false>(q, k, v, g, nullptr, 0, tokens, d, stride, chunk, s, o, scratch);
}

}  // namespace sy::engine
