#include "engine/moe/router.h"

#include <gtest/gtest.h>

#include "engine/model/weights.h"
#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

class RouterTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(RouterTest, MatchesSortingReference) {
  const auto [top_k, renorm] = GetParam();
  const int tokens = 20, experts = 8;
  std::vector<float> logits(tokens * experts);
  FillTensor(11, "router", 3.0f, 0.0f, logits.data(), logits.size());
  const std::vector<float> orig = logits;
  std::vector<int32_t> ids(tokens * top_k);
  std::vector<float> w(tokens * top_k);
  RouteTopK(logits.data(), tokens, experts, top_k, renorm, ids.data(), w.data());
  for (int t = 0; t < tokens; ++t) {
    std::vector<float> row(orig.begin() + t * experts, orig.begin() + (t + 1) * experts);
    const ref::Routing want = ref::Route(row, top_k, renorm);
    float sum = 0;
    for (int k = 0; k < top_k; ++k) {
      EXPECT_EQ(ids[t * top_k + k], want.ids[k]) << t << "," << k;
      EXPECT_NEAR(w[t * top_k + k], want.weights[k], 1e-6f);
      if (k > 0) {
        EXPECT_GE(w[t * top_k + k - 1], w[t * top_k + k]);
      }
      sum += w[t * top_k + k];
    }
    if (renorm) {
      EXPECT_NEAR(sum, 1.0f, 1e-6f);
    } else {
      EXPECT_LT(sum, 1.0f + 1e-6f);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TopK, RouterTest,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8), ::testing::Bool()));

TEST(RouterTieTest, TiesGoToTheLowerExpertId) {
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, 2.0f};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  RouteTopK(logits.data(), 1, 4, 2, true, ids.data(), w.data());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
}

}  // namespace
}  // namespace sy::engine
