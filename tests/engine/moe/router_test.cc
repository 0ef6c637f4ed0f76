#include "engine/moe/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

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

// ---- sigmoid grouped top-k (seed 001 §3.5) ----

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// The logit whose sigmoid is p (up to float rounding).
float Logit(float p) { return std::log(p / (1.0f - p)); }

// Brute-force reference by sorting: groups ranked by the sum of their two
// highest biased scores (stable: ties keep the lower group), then the kept
// groups' experts ranked by biased score (stable: lower id first).
ref::Routing GroupedReference(const std::vector<float>& logits, const std::vector<float>& bias,
                              const GroupedRouting& r) {
  const int gs = r.experts / r.n_group;
  std::vector<float> s(r.experts), b(r.experts);
  for (int e = 0; e < r.experts; ++e) {
    s[e] = Sigmoid(logits[e]);
    b[e] = s[e] + bias[e];
  }
  std::vector<float> score(r.n_group);
  for (int g = 0; g < r.n_group; ++g) {
    std::vector<float> v(b.begin() + g * gs, b.begin() + (g + 1) * gs);
    std::sort(v.begin(), v.end(), std::greater<float>());
    score[g] = gs == 1 ? v[0] : v[0] + v[1];
  }
  std::vector<int> groups(r.n_group);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](int x, int y) { return score[x] > score[y]; });
  std::vector<int> cand;
  for (int e = 0; e < r.experts; ++e) {
    if (std::find(groups.begin(), groups.begin() + r.topk_group, e / gs) !=
        groups.begin() + r.topk_group) {
      cand.push_back(e);
    }
  }
  std::stable_sort(cand.begin(), cand.end(), [&](int x, int y) { return b[x] > b[y]; });
  ref::Routing out;
  double sum = 0.0;
  for (int k = 0; k < r.top_k; ++k) {
    out.ids.push_back(cand[k]);
    sum += s[cand[k]];
  }
  for (int k = 0; k < r.top_k; ++k) {
    const double w = r.renormalize ? s[cand[k]] / sum : s[cand[k]];
    out.weights.push_back(static_cast<float>(w * r.scaling));
  }
  return out;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::vector<float> scores;  // what the router left in `logits`
};

Routed RouteOne(std::vector<float> logits, const std::vector<float>& bias,
                const GroupedRouting& r) {
  Routed out;
  out.ids.assign(r.top_k, -1);
  out.weights.assign(r.top_k, -1.0f);
  RouteGroupedSigmoid(logits.data(), bias.data(), 1, r, out.ids.data(), out.weights.data());
  out.scores = logits;
  return out;
}

TEST(GroupedRouterTest, GroupsRankByTopTwoSumAndADroppedGroupsBestExpertNeverWins) {
  // Groups of 2: {0.95, 0.05} (sum 1.0, but the best single expert),
  // {0.6, 0.6} (1.2), {0.55, 0.55} (1.1), {0.1, 0.1} (0.2). Keep 2 groups.
  const std::vector<float> p = {0.95f, 0.05f, 0.6f, 0.6f, 0.55f, 0.55f, 0.1f, 0.1f};
  std::vector<float> logits;
  for (float v : p) logits.push_back(Logit(v));
  const std::vector<float> bias(8, 0.0f);
  const GroupedRouting r{.experts = 8,
                         .top_k = 3,
                         .n_group = 4,
                         .topk_group = 2,
                         .renormalize = false,
                         .scaling = 1.0f};
  const Routed got = RouteOne(logits, bias, r);
  // Ties inside a group go to the lower id: 2 before 3, 4 before 5.
  EXPECT_EQ(got.ids, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_NEAR(got.weights[0], 0.6f, 1e-6f);
  EXPECT_NEAR(got.weights[2], 0.55f, 1e-6f);
  for (int e = 0; e < 8; ++e) EXPECT_NEAR(got.scores[e], p[e], 1e-6f);  // sigmoid left in place
}

TEST(GroupedRouterTest, NegativeBiasedScoresStillComeOnlyFromKeptGroups) {
  // Every biased score is negative. Group 1 ({-0.3, -0.35}) has the best
  // top-2 sum; group 0 holds the single best expert (-0.1) next to a poor
  // one. A kernel that masked dropped groups to 0 (instead of skipping them)
  // would pick masked experts, since 0 > every biased score here.
  const std::vector<float> logits(8, 0.0f);  // s = 0.5 everywhere
  const std::vector<float> bias = {-0.6f, -1.4f, -0.8f, -0.85f, -1.1f, -1.1f, -1.2f, -1.3f};
  const GroupedRouting r{.experts = 8,
                         .top_k = 2,
                         .n_group = 4,
                         .topk_group = 1,
                         .renormalize = true,
                         .scaling = 1.0f};
  const Routed got = RouteOne(logits, bias, r);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{2, 3}));
  EXPECT_FLOAT_EQ(got.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(got.weights[1], 0.5f);
  // Keep two groups and ask for 3: group 0's best (-0.1) joins, its poor
  // expert (-0.9) still loses to group 1's second.
  const GroupedRouting r2{.experts = 8,
                          .top_k = 3,
                          .n_group = 4,
                          .topk_group = 2,
                          .renormalize = true,
                          .scaling = 1.0f};
  EXPECT_EQ(RouteOne(logits, bias, r2).ids, (std::vector<int32_t>{0, 2, 3}));
}

TEST(GroupedRouterTest, BiasSelectsButWeightsComeFromUnbiasedScores) {
  const std::vector<float> p = {0.9f, 0.8f, 0.7f, 0.6f};
  std::vector<float> logits;
  for (float v : p) logits.push_back(Logit(v));
  const std::vector<float> bias = {0.0f, 0.0f, 0.5f, 0.45f};
  const GroupedRouting r{.experts = 4,
                         .top_k = 2,
                         .n_group = 1,
                         .topk_group = 1,
                         .renormalize = false,
                         .scaling = 1.0f};
  const Routed got = RouteOne(logits, bias, r);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{2, 3}));  // biased 1.2, 1.05 beat 0.9, 0.8
  EXPECT_NEAR(got.weights[0], 0.7f, 1e-6f);
  EXPECT_NEAR(got.weights[1], 0.6f, 1e-6f);
}

TEST(GroupedRouterTest, RenormalisationAndScalingAppliedOnce) {
  const std::vector<float> p = {0.9f, 0.2f, 0.7f, 0.6f};
  std::vector<float> logits;
  for (float v : p) logits.push_back(Logit(v));
  const std::vector<float> bias(4, 0.0f);
  GroupedRouting r{.experts = 4,
                   .top_k = 2,
                   .n_group = 2,
                   .topk_group = 2,
                   .renormalize = true,
                   .scaling = 2.5f};
  Routed got = RouteOne(logits, bias, r);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(got.weights[0], 2.5f * 0.9f / 1.6f, 1e-6f);
  EXPECT_NEAR(got.weights[1], 2.5f * 0.7f / 1.6f, 1e-6f);
  EXPECT_NEAR(got.weights[0] + got.weights[1], 2.5f, 1e-6f);
  r.renormalize = false;
  got = RouteOne(logits, bias, r);
  EXPECT_NEAR(got.weights[0], 2.5f * 0.9f, 1e-6f);
  EXPECT_NEAR(got.weights[1], 2.5f * 0.7f, 1e-6f);
}

TEST(GroupedRouterTest, TiesGoToLowerGroupsAndLowerIds) {
  const std::vector<float> logits(12, 0.3f), bias(12, 0.0f);
  const GroupedRouting r{.experts = 12,
                         .top_k = 4,
                         .n_group = 4,
                         .topk_group = 2,
                         .renormalize = true,
                         .scaling = 1.0f};
  const Routed got = RouteOne(logits, bias, r);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{0, 1, 2, 3}));
  for (float w : got.weights) EXPECT_FLOAT_EQ(w, 0.25f);
}

TEST(GroupedRouterTest, MatchesBruteForceOnRandomInputs) {
  uint64_t state = 12345;
  auto next = [&](int n) { return static_cast<int>(SplitMix64(state++) % n); };
  const int tokens = 6;
  for (int trial = 0; trial < 300; ++trial) {
    GroupedRouting r;
    r.experts = std::vector<int>{8, 16, 32, 12}[next(4)];
    std::vector<int> divisors;
    for (int g = 1; g <= r.experts; ++g) {
      if (r.experts % g == 0 && g <= 8) divisors.push_back(g);
    }
    r.n_group = divisors[next(static_cast<int>(divisors.size()))];
    r.topk_group = 1 + next(r.n_group);
    r.top_k = 1 + next(std::min(8, r.topk_group * (r.experts / r.n_group)));
    r.renormalize = next(2) == 1;
    r.scaling = next(2) == 1 ? 2.5f : 1.0f;
    std::vector<float> logits(static_cast<size_t>(tokens) * r.experts), bias(r.experts);
    FillTensor(trial, "logits", 4.0f, 0.0f, logits.data(), logits.size());
    // Some trials push every biased score below zero; some quantise to make ties.
    FillTensor(trial, "bias", 0.5f, next(3) == 0 ? -2.0f : 0.0f, bias.data(), bias.size());
    if (next(2) == 1) {
      for (float& v : logits) v = std::round(v * 2.0f) / 2.0f;
      for (float& v : bias) v = std::round(v * 4.0f) / 4.0f;
    }
    std::vector<float> work = logits;
    std::vector<int32_t> ids(static_cast<size_t>(tokens) * r.top_k);
    std::vector<float> w(ids.size());
    RouteGroupedSigmoid(work.data(), bias.data(), tokens, r, ids.data(), w.data());
    for (int t = 0; t < tokens; ++t) {
      const std::vector<float> row(logits.begin() + t * r.experts,
                                   logits.begin() + (t + 1) * r.experts);
      const ref::Routing want = GroupedReference(row, bias, r);
      for (int k = 0; k < r.top_k; ++k) {
        ASSERT_EQ(ids[t * r.top_k + k], want.ids[k])
            << "trial " << trial << " token " << t << " rank " << k << " experts " << r.experts
            << " groups " << r.n_group << "/" << r.topk_group << " top_k " << r.top_k;
        ASSERT_NEAR(w[t * r.top_k + k], want.weights[k], 1e-5f) << "trial " << trial;
      }
    }
  }
}

}  // namespace
}  // namespace sy::engine
