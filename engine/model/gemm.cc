#include "engine/model/gemm.h"

#include <cblas.h>
#include <immintrin.h>

#include <cstddef>
#include <cstring>

namespace sy::engine {

namespace {

// c rows r < R (stride n) += a rows (stride lda) * b (rows of stride ldb). k is unrolled by 4 so
// each c vector is loaded and stored once per four rows of b; b rows are read
// sequentially, once for all R rows of a.
template <int R>
__attribute__((target("avx2,fma"))) void RowsAvx2(const float* a, int lda, const float* b, int ldb,
                                                  float* c, int k, int n) {
  const int n8 = n & ~7;
  int kk = 0;
  for (; kk + 4 <= k; kk += 4) {
    const float* b0 = b + static_cast<size_t>(kk) * ldb;
    const float* b1 = b0 + ldb;
    const float* b2 = b1 + ldb;
    const float* b3 = b2 + ldb;
    __m256 x[R][4];
    for (int r = 0; r < R; ++r) {
      for (int u = 0; u < 4; ++u)
        x[r][u] = _mm256_broadcast_ss(a + static_cast<size_t>(r) * lda + kk + u);
    }
    for (int j = 0; j < n8; j += 8) {
      const __m256 v0 = _mm256_loadu_ps(b0 + j), v1 = _mm256_loadu_ps(b1 + j);
      const __m256 v2 = _mm256_loadu_ps(b2 + j), v3 = _mm256_loadu_ps(b3 + j);
      for (int r = 0; r < R; ++r) {
        float* cp = c + static_cast<size_t>(r) * n + j;
        __m256 acc = _mm256_loadu_ps(cp);
        acc = _mm256_fmadd_ps(x[r][0], v0, acc);
        acc = _mm256_fmadd_ps(x[r][1], v1, acc);
        acc = _mm256_fmadd_ps(x[r][2], v2, acc);
        acc = _mm256_fmadd_ps(x[r][3], v3, acc);
        _mm256_storeu_ps(cp, acc);
      }
    }
    for (int j = n8; j < n; ++j) {
      for (int r = 0; r < R; ++r) {
        const float* ar = a + static_cast<size_t>(r) * lda + kk;
        float& cv = c[static_cast<size_t>(r) * n + j];
        cv = cv + ar[0] * b0[j];
        cv = cv + ar[1] * b1[j];
        cv = cv + ar[2] * b2[j];
        cv = cv + ar[3] * b3[j];
      }
    }
  }
  for (; kk < k; ++kk) {
    const float* b0 = b + static_cast<size_t>(kk) * ldb;
    for (int r = 0; r < R; ++r) {
      const float xv = a[static_cast<size_t>(r) * lda + kk];
      float* cr = c + static_cast<size_t>(r) * n;
      for (int j = 0; j < n; ++j) cr[j] += xv * b0[j];
    }
  }
}

void SmallAvx2(const float* a, int lda, const float* b, int ldb, float* c, int m, int k, int n) {
  int r = 0;
  for (; r + 4 <= m; r += 4) {
    RowsAvx2<4>(a + static_cast<size_t>(r) * lda, lda, b, ldb, c + static_cast<size_t>(r) * n, k,
                n);
  }
  const float* ar = a + static_cast<size_t>(r) * lda;
  float* cr = c + static_cast<size_t>(r) * n;
  switch (m - r) {
    case 3:
      RowsAvx2<3>(ar, lda, b, ldb, cr, k, n);
      break;
    case 2:
      RowsAvx2<2>(ar, lda, b, ldb, cr, k, n);
      break;
    case 1:
      RowsAvx2<1>(ar, lda, b, ldb, cr, k, n);
      break;
    default:
      break;
  }
}

bool HasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

__attribute__((target("avx2,fma"))) float DotAvx2(const float* x, const float* y, int n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8)
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
  a0 = _mm256_add_ps(a0, a1);
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  float s = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

__attribute__((target("avx2,fma"))) void AxpyAvx2(float alpha, const float* x, float* y, int n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace

float Dot(const float* x, const float* y, int n) {
  if (HasAvx2Fma()) return DotAvx2(x, y, n);
  // Four partial sums break the add dependency chain without -ffast-math.
  float s[4] = {0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int u = 0; u < 4; ++u) s[u] += x[i + u] * y[i + u];
  }
  for (; i < n; ++i) s[0] += x[i] * y[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void Axpy(float alpha, const float* x, float* y, int n) {
  if (HasAvx2Fma()) {
    AxpyAvx2(alpha, x, y, n);
    return;
  }
  for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void GemmStrided(const float* a, int lda, const float* b, int ldb, float* c, int m, int k, int n,
                 bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (m > kSmallGemmRows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
                accumulate ? 1.0f : 0.0f, c, n);
    return;
  }
  if (HasAvx2Fma()) {
    if (!accumulate) std::memset(c, 0, sizeof(float) * static_cast<size_t>(m) * n);
    SmallAvx2(a, lda, b, ldb, c, m, k, n);
    return;
  }
  for (int r = 0; r < m; ++r) {
    cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, b, ldb, a + static_cast<size_t>(r) * lda, 1,
                accumulate ? 1.0f : 0.0f, c + static_cast<size_t>(r) * n, 1);
  }
}

}  // namespace sy::engine
