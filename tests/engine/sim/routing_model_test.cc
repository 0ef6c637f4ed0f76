// RoutingModel (engine/sim/routing_model.h): the sampled, skewed, drifting
// expert popularity of the simulated backend.
#include "engine/sim/routing_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

RoutingModel Make(int layers, int experts, int top_k, RoutingModelOptions o) {
  Result<RoutingModel> m = RoutingModel::Create(layers, experts, top_k, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// Mean counts[e] / tokens over `calls` samples of `tokens` tokens.
std::vector<double> MeanShare(RoutingModel& m, int layer, int64_t tokens, int calls) {
  std::vector<double> sum;
  std::vector<int64_t> c;
  for (int i = 0; i < calls; ++i) {
    m.Sample(layer, tokens, 0, &c);
    if (sum.empty()) sum.assign(c.size(), 0.0);
    for (size_t e = 0; e < c.size(); ++e) sum[e] += double(c[e]);
  }
  for (double& s : sum) s /= double(tokens) * calls;
  return sum;
}

TEST(RoutingModelTest, CountsSumToTokensTimesTopKAndNeverExceedTokens) {
  for (double skew : {0.0, 1.0, 3.0}) {
    RoutingModel m = Make(4, 128, 8, {.skew = skew, .seed = 7});
    std::vector<int64_t> c;
    for (int64_t tokens : {0, 1, 5, 16, 17, 100, 256, 4096, 16384}) {
      m.Sample(1, tokens, 0, &c);
      ASSERT_EQ(c.size(), 128u);
      EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t{0}), tokens * 8)
          << "skew " << skew << " tokens " << tokens;
      for (int64_t x : c) {
        EXPECT_GE(x, 0);
        EXPECT_LE(x, tokens) << "skew " << skew << " tokens " << tokens;
      }
    }
  }
  // A model that forces the caps: 8 of 16 experts per token, very skewed.
  RoutingModel tight = Make(1, 16, 8, {.skew = 4.0});
  std::vector<int64_t> c;
  for (int64_t tokens : {1, 2, 50, 1000}) {
    tight.Sample(0, tokens, 0, &c);
    EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t{0}), tokens * 8);
    EXPECT_LE(*std::max_element(c.begin(), c.end()), tokens);
  }
}

TEST(RoutingModelTest, SkewZeroIsUniform) {
  RoutingModel m = Make(2, 64, 4, {.skew = 0});
  for (double p : m.Popularity(0)) EXPECT_DOUBLE_EQ(p, 1.0 / 64);
  for (double p : m.Inclusion(1)) EXPECT_NEAR(p, 4.0 / 64, 1e-9);
  for (double s : MeanShare(m, 0, 4096, 200)) EXPECT_NEAR(s, 4.0 / 64, 0.002);
  for (double s : MeanShare(m, 1, 4, 20000)) EXPECT_NEAR(s, 4.0 / 64, 0.004);
}

// top_k = 1: a token's expert is one draw from the popularity, so shares
// converge to 1 / (rank + 1)^skew normalised, in both sampling paths.
TEST(RoutingModelTest, ZipfSharesMatchThePopularity) {
  RoutingModel m = Make(3, 16, 1, {.skew = 1.2, .seed = 3});
  const std::vector<double> p = m.Popularity(2);
  double h = 0;
  for (int r = 0; r < 16; ++r) h += std::pow(r + 1.0, -1.2);
  std::vector<double> sorted = p;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int r = 0; r < 16; ++r) EXPECT_NEAR(sorted[r], std::pow(r + 1.0, -1.2) / h, 1e-12);
  const std::vector<double> exact = MeanShare(m, 2, 16, 20000);  // 16 * 1 <= 16: exact draw
  const std::vector<double> approx = MeanShare(m, 2, 5000, 400);
  for (int e = 0; e < 16; ++e) {
    EXPECT_NEAR(exact[e], p[e], 0.006) << "expert " << e;
    EXPECT_NEAR(approx[e], p[e], 0.003) << "expert " << e;
  }
}

// top_k = 8 of 128 (Qwen3): the exact draw without replacement, the
// large-batch approximation and the documented inclusion probabilities agree.
TEST(RoutingModelTest, TopKWithoutReplacementMatchesInclusion) {
  RoutingModel m = Make(2, 128, 8, {.skew = 1.0, .seed = 11});
  const std::vector<double> pi = m.Inclusion(0);
  EXPECT_NEAR(std::accumulate(pi.begin(), pi.end(), 0.0), 8.0, 1e-6);
  for (double x : pi) EXPECT_LE(x, 1.0);
  const std::vector<double> exact = MeanShare(m, 0, 16, 40000);
  const std::vector<double> approx = MeanShare(m, 0, 512, 2000);
  const int hot = static_cast<int>(std::max_element(pi.begin(), pi.end()) - pi.begin());
  EXPECT_GT(pi[hot], 0.5);  // skew 1: the hottest expert is in most tokens' top 8
  for (int e = 0; e < 128; ++e) {
    // 640k and 1M tokens: a few standard errors.
    EXPECT_NEAR(exact[e], pi[e], 0.01 * pi[e] + 0.001) << "expert " << e;
    EXPECT_NEAR(approx[e], pi[e], 0.01 * pi[e] + 0.001) << "expert " << e;
  }
}

TEST(RoutingModelTest, DriftChangesTheRankingOnlyAfterThePeriod) {
  RoutingModel m = Make(4, 64, 4, {.skew = 1.0, .drift_period_s = 10, .drift_fraction = 0.25});
  const std::vector<double> before = m.Popularity(3);
  std::vector<int64_t> c;
  m.Sample(3, 8, 9'999'999, &c);
  EXPECT_EQ(m.Popularity(3), before);
  m.Sample(3, 8, 10'000'000, &c);
  const std::vector<double> after = m.Popularity(3);
  int changed = 0;
  for (int e = 0; e < 64; ++e) changed += after[e] != before[e];
  EXPECT_EQ(changed, 16);  // 0.25 of 64 experts: 8 disjoint swaps
  // The ranking at time t is a function of (seed, t), not of the samples drawn.
  RoutingModel fresh = Make(4, 64, 4, {.skew = 1.0, .drift_period_s = 10, .drift_fraction = 0.25});
  fresh.Sample(3, 0, 35'000'000, &c);
  for (int i = 0; i < 50; ++i) m.Sample(1, 300, 20'000'000 + i, &c);
  m.Sample(3, 0, 35'000'000, &c);
  EXPECT_EQ(m.Popularity(3), fresh.Popularity(3));
  EXPECT_EQ(m.Popularity(0), fresh.Popularity(0));
  // No drift: never changes.
  RoutingModel still = Make(2, 64, 4, {.skew = 1.0, .drift_period_s = 0});
  const std::vector<double> p0 = still.Popularity(1);
  still.Sample(1, 8, 3'600'000'000, &c);
  EXPECT_EQ(still.Popularity(1), p0);
}

TEST(RoutingModelTest, LayersHaveDifferentHotExperts) {
  RoutingModel m = Make(8, 128, 8, {.skew = 1.0});
  int distinct = 0;
  std::vector<int> hottest;
  for (int l = 0; l < 8; ++l) {
    const std::vector<double> p = m.Popularity(l);
    hottest.push_back(static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin()));
  }
  std::sort(hottest.begin(), hottest.end());
  distinct = static_cast<int>(std::unique(hottest.begin(), hottest.end()) - hottest.begin());
  EXPECT_GE(distinct, 6);
}

TEST(RoutingModelTest, DeterministicBySeed) {
  auto run = [](uint64_t seed) {
    RoutingModel m = Make(3, 128, 8, {.skew = 1.0, .drift_period_s = 1, .seed = seed});
    std::vector<int64_t> all, c;
    for (int i = 0; i < 30; ++i) {
      m.Sample(i % 3, i % 2 ? 8 : 700, int64_t{i} * 200'000, &c);
      all.insert(all.end(), c.begin(), c.end());
    }
    return all;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(RoutingModelTest, RefusesInvalidOptions) {
  EXPECT_THAT(RoutingModel::Create(0, 8, 2, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("layers")));
  EXPECT_THAT(RoutingModel::Create(2, 0, 1, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("experts")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 9, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("top_k")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 0, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("top_k")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 2, {.skew = -1}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("skew")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 2, {.skew = NAN}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("skew")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 2, {.drift_period_s = -1}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("drift_period_s")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 2, {.drift_fraction = 1.5}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("drift_fraction")));
  EXPECT_THAT(RoutingModel::Create(2, 8, 8, {}).status(), IsOk());
}

}  // namespace
}  // namespace sy::engine
