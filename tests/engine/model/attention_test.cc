#include "engine/model/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/model/weights.h"
#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

// Contiguous causal attention for one query row against rows 0..pos.
std::vector<float> RefAttend(const std::vector<float>& q, const std::vector<std::vector<float>>& k,
                             const std::vector<std::vector<float>>& v, int pos,
                             const AttentionShape& s) {
  const int d = s.head_dim;
  std::vector<float> out(s.heads * d);
  for (int h = 0; h < s.heads; ++h) {
    const int kvh = h / (s.heads / s.kv_heads);
    std::vector<float> scores(pos + 1);
    for (int j = 0; j <= pos; ++j) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += static_cast<double>(q[h * d + i]) * k[j][kvh * d + i];
      scores[j] = static_cast<float>(dot / std::sqrt(d));
    }
    const std::vector<float> p = ref::Softmax(scores);
    for (int i = 0; i < d; ++i) {
      double acc = 0;
      for (int j = 0; j <= pos; ++j) acc += p[j] * v[j][kvh * d + i];
      out[h * d + i] = static_cast<float>(acc);
    }
  }
  return out;
}

class PagedAttentionTest : public ::testing::TestWithParam<int> {};  // kv_heads

TEST_P(PagedAttentionTest, ChunkedWritesOverScatteredPagesMatchContiguousAttention) {
  const AttentionShape s{4, GetParam(), 8};
  const int kvc = s.kv_heads * s.head_dim, qc = s.heads * s.head_dim;
  KvPool pool({.num_pages = 16,
               .page_size = 4,
               .layers = 2,
               .kv_heads = s.kv_heads,
               .head_dim = s.head_dim});
  // Pages deliberately out of order so page-table indexing is exercised.
  const std::vector<int32_t> pages = {9, 2, 14, 0, 5};
  const int total = 19;
  std::vector<float> q(total * qc), kv(total * 2 * kvc);
  FillTensor(1, "q", 1.0f, 0.0f, q.data(), q.size());
  FillTensor(2, "kv", 1.0f, 0.0f, kv.data(), kv.size());
  std::vector<std::vector<float>> kr(total), vr(total);
  for (int t = 0; t < total; ++t) {
    kr[t].assign(&kv[t * 2 * kvc], &kv[t * 2 * kvc + kvc]);
    vr[t].assign(&kv[t * 2 * kvc + kvc], &kv[(t + 1) * 2 * kvc]);
  }
  std::vector<float> out(total * qc), scores(s.heads * total);
  // A prefill chunk of 6, another of 10, then three decode steps, on layer 1.
  int start = 0;
  for (int n : {6, 10, 1, 1, 1}) {
    WriteKv(pool, 1, pages.data(), start, n, &kv[start * 2 * kvc], &kv[start * 2 * kvc + kvc],
            2 * kvc, s);
    PagedAttention(pool, 1, pages.data(), start, n, &q[start * qc], qc, s, scores.data(),
                   &out[start * qc], qc);
    start += n;
  }
  ASSERT_EQ(start, total);
  for (int t = 0; t < total; ++t) {
    std::vector<float> qt(&q[t * qc], &q[(t + 1) * qc]);
    const std::vector<float> want = RefAttend(qt, kr, vr, t, s);
    for (int i = 0; i < qc; ++i) ASSERT_NEAR(out[t * qc + i], want[i], 1e-5f) << t << "," << i;
  }
  // Layer 0 was never written: its pages still hold zeros.
  EXPECT_EQ(pool.K(9, 0, 0)[0], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(KvHeads, PagedAttentionTest, ::testing::Values(4, 2, 1));

TEST(AttentionFlopsTest, CountsCausalContext) {
  const AttentionShape s{2, 2, 4};
  // Decode at start_pos 9: ctx 10 -> 10 * 2 heads * 4 dims * 4 flops.
  EXPECT_EQ(AttentionFlops(9, 1, s), 10 * 2 * 4 * 4);
  // Prefill 3 tokens from 0: ctx 1+2+3.
  EXPECT_EQ(AttentionFlops(0, 3, s), 6 * 2 * 4 * 4);
}

}  // namespace
}  // namespace sy::engine
