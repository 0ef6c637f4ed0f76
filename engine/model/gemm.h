// File: engine/model/gemm.h
//
// BLAS-like kernels of the model. Row-major fp32 GEMM: c[m x n] = a[m x k] * b[k x n]
// (+ c when accumulate). Decode steps make m tiny (one row per token on a
// device, a handful per expert), where OpenBLAS sgemm spends most of its time
// packing b; so m <= kSmallGemmRows uses a streaming kernel that reads each
// row of b once for up to 4 rows of a (AVX2/FMA when the CPU has it, else
// sgemv per row), and larger m goes to cblas_sgemm.
//
// A row's result does not depend on m in the small path (each element is a
// k-ordered sum), so batching rows together never changes a token's numbers
// there; in the sgemm path it may change the last bits.
//
// Thread-safety: pure; call from any thread (OpenBLAS must be single-threaded
// or thread-safe, see ModelRunner::Create).
#pragma once

namespace sy::engine {

inline constexpr int kSmallGemmRows = 12;

// lda: stride between rows of a (>= k); ldb: stride between rows of b (>= n),
// so b may be a column block of a wider matrix. c has exactly n columns.
// The numbers do not depend on lda or ldb: the same (m, k, n) and the same
// values give bit-identical c whatever the strides (both paths; tested), which
// lets a column slice of a weight be multiplied in place with the exact
// result of a contiguous copy of it (engine/moe/moe_common.h).
void GemmStrided(const float* a, int lda, const float* b, int ldb, float* c, int m, int k, int n,
                 bool accumulate = false);

// lda: stride between rows of a (>= k). REQUIRES: b has exactly n columns, c has n columns.
inline void GemmLda(const float* a, int lda, const float* b, float* c, int m, int k, int n,
                    bool accumulate = false) {
  GemmStrided(a, lda, b, n, c, m, k, n, accumulate);
}

inline void Gemm(const float* a, const float* b, float* c, int m, int k, int n,
                 bool accumulate = false) {
  GemmLda(a, k, b, c, m, k, n, accumulate);
}

// Level-1 helpers for the attention and norm loops (AVX2/FMA when present).
// Dot sums in a fixed lane order, so equal inputs give equal results.
float Dot(const float* x, const float* y, int n);
// y[i] += alpha * x[i].
void Axpy(float alpha, const float* x, float* y, int n);

}  // namespace sy::engine
