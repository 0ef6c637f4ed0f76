#include "engine/model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/gemm.h"
#include "engine/model/layers.h"

namespace sy::engine {

void WriteKv(KvPool& pool, int layer, const int32_t* pages, int start_pos, int n, const float* k,
             const float* v, int stride, const AttentionShape& shape) {
  const int ps = pool.page_size();
  const size_t row = static_cast<size_t>(shape.kv_heads) * shape.head_dim * sizeof(float);
  for (int i = 0; i < n; ++i) {
    const int p = start_pos + i;
    std::memcpy(pool.K(pages[p / ps], layer, p % ps), k + static_cast<size_t>(i) * stride, row);
    std::memcpy(pool.V(pages[p / ps], layer, p % ps), v + static_cast<size_t>(i) * stride, row);
  }
}

void PagedAttention(const KvPool& pool, int layer, const int32_t* pages, int start_pos, int n,
                    const float* q, int q_stride, const AttentionShape& shape, float* scores,
                    float* out, int out_stride) {
  const int ps = pool.page_size();
  const int d = shape.head_dim;
  const int group = shape.heads / shape.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int i = 0; i < n; ++i) {
    const int ctx = start_pos + i + 1;
    const float* qi = q + static_cast<size_t>(i) * q_stride;
    float* oi = out + static_cast<size_t>(i) * out_stride;
    // Position-major sweep: each cached K/V row is read once, contiguously,
    // for all heads (the row holds every KV head of that position).
    for (int j = 0; j < ctx; ++j) {
      const float* kr = pool.K(pages[j / ps], layer, j % ps);
      for (int h = 0; h < shape.heads; ++h) {
        const float* qh = qi + static_cast<size_t>(h) * d;
        const float* kh = kr + static_cast<size_t>(h / group) * d;
        scores[static_cast<size_t>(h) * ctx + j] = Dot(qh, kh, d) * scale;
      }
    }
    for (int h = 0; h < shape.heads; ++h) Softmax(scores + static_cast<size_t>(h) * ctx, ctx);
    std::fill(oi, oi + static_cast<size_t>(shape.heads) * d, 0.0f);
    for (int j = 0; j < ctx; ++j) {
      const float* vr = pool.V(pages[j / ps], layer, j % ps);
      for (int h = 0; h < shape.heads; ++h) {
        const float w = scores[static_cast<size_t>(h) * ctx + j];
        Axpy(w, vr + static_cast<size_t>(h / group) * d, oi + static_cast<size_t>(h) * d, d);
      }
    }
  }
}

int64_t AttentionFlops(int start_pos, int n, const AttentionShape& shape) {
  // Sum over tokens of ctx = start_pos + i + 1, times 2 GEMV-like passes of 2 flops.
  const int64_t ctx_sum =
      static_cast<int64_t>(n) * start_pos + static_cast<int64_t>(n) * (n + 1) / 2;
  return ctx_sum * shape.heads * shape.head_dim * 4;
}

}  // namespace sy::engine
