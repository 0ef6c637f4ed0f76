#include "engine/model/gemm.h"

#include <gtest/gtest.h>

#include "engine/model/weights.h"
#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

// (m, k, n): both sides of kSmallGemmRows, n not a multiple of 8, k not of 4.
class GemmTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(GemmTest, MatchesNaiveWithStridedRowsAndAccumulate) {
  const auto [m, k, n] = GetParam();
  const int lda = k + 3;  // rows of a padded, as SwiGLU's down projection reads them
  std::vector<float> a(static_cast<size_t>(m) * lda), b(static_cast<size_t>(k) * n);
  FillTensor(1, "a", 1.0f, 0.0f, a.data(), a.size());
  FillTensor(2, "b", 1.0f, 0.0f, b.data(), b.size());
  std::vector<float> c(static_cast<size_t>(m) * n, 123.0f);  // stale values must be overwritten
  GemmLda(a.data(), lda, b.data(), c.data(), m, k, n);
  std::vector<float> acc(c.size(), 1.0f);
  GemmLda(a.data(), lda, b.data(), acc.data(), m, k, n, /*accumulate=*/true);
  for (int r = 0; r < m; ++r) {
    std::vector<float> row(a.begin() + r * lda, a.begin() + r * lda + k);
    const std::vector<float> want = ref::MatVec(row, b, k, n);
    for (int j = 0; j < n; ++j) {
      ASSERT_NEAR(c[r * n + j], want[j], 2e-5f * k) << r << "," << j;
      ASSERT_NEAR(acc[r * n + j], want[j] + 1.0f, 2e-5f * k) << r << "," << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest,
                         ::testing::Combine(::testing::Values(1, 3, 4, 7, 12, 13, 40),
                                            ::testing::Values(1, 6, 64),
                                            ::testing::Values(1, 9, 260)));

// ldb: a column block of a wider b, multiplied in place, must give exactly
// (bitwise) what a contiguous copy of the block gives, on both paths (the
// TP and EP MoE layouts rely on it: engine/moe/moe_common.h).
TEST_P(GemmTest, ColumnBlockInPlaceEqualsContiguousCopyBitwise) {
  const auto [m, k, n] = GetParam();
  const int ldb = 2 * n + 5, col = n + 3;  // the block: columns [col, col + n) of b
  std::vector<float> a(static_cast<size_t>(m) * k), wide(static_cast<size_t>(k) * ldb);
  FillTensor(3, "a", 1.0f, 0.0f, a.data(), a.size());
  FillTensor(4, "wide", 1.0f, 0.0f, wide.data(), wide.size());
  std::vector<float> block(static_cast<size_t>(k) * n);
  for (int r = 0; r < k; ++r) {
    for (int j = 0; j < n; ++j) block[r * n + j] = wide[static_cast<size_t>(r) * ldb + col + j];
  }
  std::vector<float> strided(static_cast<size_t>(m) * n, 7.0f), copy(strided.size(), 9.0f);
  GemmStrided(a.data(), k, wide.data() + col, ldb, strided.data(), m, k, n);
  Gemm(a.data(), block.data(), copy.data(), m, k, n);
  for (size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(strided[i], copy[i]) << i;
  std::vector<float> acc(copy.size(), 1.0f), acc_copy(copy.size(), 1.0f);
  GemmStrided(a.data(), k, wide.data() + col, ldb, acc.data(), m, k, n, /*accumulate=*/true);
  Gemm(a.data(), block.data(), acc_copy.data(), m, k, n, /*accumulate=*/true);
  for (size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(acc[i], acc_copy[i]) << i;
  // And the value is right (against the naive product).
  for (int r = 0; r < m; ++r) {
    std::vector<float> row(a.begin() + r * k, a.begin() + (r + 1) * k);
    const std::vector<float> want = ref::MatVec(row, block, k, n);
    for (int j = 0; j < n; ++j) ASSERT_NEAR(strided[r * n + j], want[j], 2e-5f * k);
  }
}

TEST(GemmRowIndependenceTest, SmallPathRowResultDoesNotDependOnBatch) {
  const int k = 37, n = 19;
  std::vector<float> a(static_cast<size_t>(kSmallGemmRows) * k), b(static_cast<size_t>(k) * n);
  FillTensor(3, "a", 1.0f, 0.0f, a.data(), a.size());
  FillTensor(4, "b", 1.0f, 0.0f, b.data(), b.size());
  std::vector<float> all(static_cast<size_t>(kSmallGemmRows) * n), one(n);
  Gemm(a.data(), b.data(), all.data(), kSmallGemmRows, k, n);
  for (int r = 0; r < kSmallGemmRows; ++r) {
    Gemm(&a[r * k], b.data(), one.data(), 1, k, n);
    for (int j = 0; j < n; ++j) ASSERT_EQ(one[j], all[r * n + j]) << r;
  }
}

}  // namespace
}  // namespace sy::engine

namespace sy::engine {
namespace {

TEST(Level1Test, DotAndAxpyMatchNaiveForAllTailLengths) {
  std::vector<float> x(70), y(70);
  FillTensor(5, "x", 1.0f, 0.0f, x.data(), x.size());
  FillTensor(6, "y", 1.0f, 0.0f, y.data(), y.size());
  for (int n = 0; n <= 70; ++n) {
    double want = 0;
    for (int i = 0; i < n; ++i) want += static_cast<double>(x[i]) * y[i];
    EXPECT_NEAR(Dot(x.data(), y.data(), n), want, 1e-5) << n;
    std::vector<float> z = y;
    Axpy(0.5f, x.data(), z.data(), n);
    for (int i = 0; i < 70; ++i)
      ASSERT_EQ(z[i], i < n ? y[i] + 0.5f * x[i] : y[i]) << n << "," << i;
  }
}

}  // namespace
}  // namespace sy::engine
