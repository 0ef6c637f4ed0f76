#include "engine/moe/ep_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "engine/distributed/inproc_communicator.h"
#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

ModelConfig MoeConfig(int top_k) {
  ModelConfig c;
  c.hidden = 32;
  c.layers = 1;
  c.heads = 2;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.experts = 8;
  c.top_k = top_k;
  c.expert_inter = 16;
  c.shared_inter = 24;
  return c;
}

struct RankResult {
  std::vector<float> out;
  std::vector<int64_t> counts;
  int expert_rows = 0;
  std::vector<telemetry::Span> spans;
};

// Runs one MoE layer on P ranks (one thread each); rank r holds tokens[r]
// token vectors. `patch` may edit each rank's weights (e.g. the router).
std::vector<RankResult> RunEp(const ModelConfig& c, int p, const std::vector<std::vector<float>>& x,
                              void (*patch)(LayerWeights&) = nullptr, int layer = 0,
                              const ExpertMap* placement = nullptr) {
  const ExpertMap round_robin =
      ExpertMap::RoundRobin(c.layers, std::min(c.first_k_dense_replace, c.layers), c.experts, p);
  const ExpertMap& map = placement != nullptr ? *placement : round_robin;
  InProcCommunicator comm(p);
  std::vector<RankResult> res(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      ModelWeights w = BuildWeights(c, 9, map.ExpertsOnDevice(r));
      if (patch) patch(w.layers[layer]);
      SpanRecorder rec(r, SpanRecorder::Clock::now());
      rec.Reset(TraceLevel::kFull);
      EpMoeLayer moe(c, r, &map, &comm);
      const int tokens = static_cast<int>(x[r].size()) / c.hidden;
      res[r].out.assign(x[r].size(), -1.0f);
      res[r].counts.assign(c.experts, 0);
      // Two rounds: the second must not see leftovers from the first.
      moe.Forward(layer, w.layers[layer], x[r].data(), tokens, res[r].out.data(), &rec,
                  res[r].counts.data());
      res[r].counts.assign(c.experts, 0);
      moe.Forward(layer, w.layers[layer], x[r].data(), tokens, res[r].out.data(), &rec,
                  res[r].counts.data());
      res[r].expert_rows = moe.last_expert_rows();
      res[r].spans = rec.spans();
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

std::vector<std::vector<float>> Inputs(const ModelConfig& c, const std::vector<int>& tokens,
                                       float offset = 0.0f) {
  std::vector<std::vector<float>> x;
  for (size_t r = 0; r < tokens.size(); ++r) {
    x.emplace_back(static_cast<size_t>(tokens[r]) * c.hidden);
    FillTensor(100 + r, "x", 1.0f, offset, x.back().data(), x.back().size());
  }
  return x;
}

void ExpectMatchesReference(const ModelConfig& c, const std::vector<std::vector<float>>& x,
                            const std::vector<RankResult>& res,
                            void (*patch)(LayerWeights&) = nullptr) {
  ModelWeights full = ref::FullWeights(c, 9);
  if (patch) patch(full.layers[0]);
  int64_t routed = 0;
  for (size_t r = 0; r < x.size(); ++r) {
    const int tokens = static_cast<int>(x[r].size()) / c.hidden;
    for (int t = 0; t < tokens; ++t) {
      std::vector<float> xt(x[r].begin() + t * c.hidden, x[r].begin() + (t + 1) * c.hidden);
      const std::vector<float> want = ref::Moe(c, full.layers[0], xt);
      for (int i = 0; i < c.hidden; ++i) {
        ASSERT_NEAR(res[r].out[t * c.hidden + i], want[i], 1e-5f) << "rank " << r << " token " << t;
      }
    }
    int64_t sum = 0;
    for (int64_t n : res[r].counts) sum += n;
    EXPECT_EQ(sum, static_cast<int64_t>(tokens) * c.top_k);
    routed += sum;
  }
  int64_t computed = 0;
  for (const RankResult& r : res) computed += r.expert_rows;
  EXPECT_EQ(computed, routed);  // every routed pair computed exactly once
}

class EpMoeTest : public ::testing::TestWithParam<std::tuple<int, int>> {};  // P, top_k

TEST_P(EpMoeTest, MatchesSingleDeviceReferenceWithAnIdleRank) {
  const auto [p, top_k] = GetParam();
  const ModelConfig c = MoeConfig(top_k);
  std::vector<int> tokens = {5, 0, 3, 1};  // rank 1 has no tokens
  tokens.resize(p);
  if (p == 1) tokens[0] = 6;
  const auto x = Inputs(c, tokens);
  const auto res = RunEp(c, p, x);
  ExpectMatchesReference(c, x, res);
  // Every rank joins both all-to-alls, idle or not.
  for (int r = 0; r < p; ++r) {
    int comm = 0;
    for (const auto& s : res[r].spans) comm += s.kind == "comm";
    EXPECT_EQ(comm, 4) << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EpMoeTest,
                         ::testing::Combine(::testing::Values(1, 3, 4),
                                            ::testing::Values(1, 2, 3)));

// Every token prefers experts 1 then 5: with P = 4 both live on rank 1, so
// ranks 0, 2 and 3 receive nothing and rank 1 gets every row.
void SkewRouter(LayerWeights& w) {
  const int experts = 8;
  const size_t hidden = w.router.size() / experts;
  std::fill(w.router.begin(), w.router.end(), 0.0f);
  for (size_t i = 0; i < hidden; ++i) {
    w.router[i * experts + 1] = 0.5f;
    w.router[i * experts + 5] = 0.25f;
  }
}

TEST(EpMoeSkewTest, UnbalancedRoutingSendsEverythingToOneRank) {
  const ModelConfig c = MoeConfig(2);
  // Positive inputs (offset 1.5 over [-1, 1)) make the skewed logits positive.
  const auto x = Inputs(c, {4, 2, 0, 3}, 1.5f);
  const auto res = RunEp(c, 4, x, SkewRouter);
  ExpectMatchesReference(c, x, res, SkewRouter);
  EXPECT_EQ(res[0].expert_rows, 0);
  EXPECT_EQ(res[1].expert_rows, (4 + 2 + 3) * 2);
  EXPECT_EQ(res[2].expert_rows, 0);
  EXPECT_EQ(res[3].expert_rows, 0);
  EXPECT_EQ(res[0].counts[1], 4);
  EXPECT_EQ(res[0].counts[5], 4);
  // Rank 1 sent its own rows to itself: dispatch bytes leave only from 0 and 3.
  for (const auto& s : res[1].spans) {
    if (s.name == "dispatch") {
      EXPECT_EQ(s.bytes, 0);
    }
  }
  bool rank0_sent = false;
  for (const auto& s : res[0].spans) {
    if (s.name == "dispatch" && s.bytes == 4 * 2 * (kDispatchHeader + c.hidden) * 4)
      rank0_sent = true;
  }
  EXPECT_TRUE(rank0_sent);
}

// Redundant experts: E = 8 over P = 4 with N = 12 slots (3 per device);
// experts 0..3 have two replicas. Every token picks experts 1 then 5: the
// rows for expert 1 split over its replicas on devices 0 and 3 (round-robin
// per source, offset by the source rank), expert 5's all go to device 1, and
// the outputs still match the single-device reference.
TEST(EpMoeReplicaTest, RowsSplitOverReplicasAndOutputsMatch) {
  const ModelConfig c = MoeConfig(2);
  const std::vector<std::vector<int>> rows = {{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3}};
  const Result<ExpertMap> map = ExpertMap::DeviceMajor(1, 0, c.experts, 4, rows);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->replicas(0, 1).size(), 2u);
  const auto x = Inputs(c, {4, 2, 0, 3}, 1.5f);
  const auto res = RunEp(c, 4, x, SkewRouter, 0, &*map);
  ExpectMatchesReference(c, x, res, SkewRouter);
  // Expert 1 (slots 1 on device 0 and 9 on device 3): rank 0 sends 2 + 2,
  // rank 1 sends 1 + 1, rank 3 sends 1 to device 0 and 2 to device 3.
  EXPECT_EQ(res[0].expert_rows, 4);
  EXPECT_EQ(res[1].expert_rows, 4 + 2 + 3);  // every expert-5 row
  EXPECT_EQ(res[2].expert_rows, 0);
  EXPECT_EQ(res[3].expert_rows, 5);
  EXPECT_EQ(res[0].counts[1], 4);  // counts stay per logical expert
  EXPECT_EQ(res[0].counts[5], 4);
}

TEST(EpMoeSpanTest, ComputeSpansCarryLayerAndWork) {
  const ModelConfig c = MoeConfig(2);
  const auto x = Inputs(c, {3, 3});
  const auto res = RunEp(c, 2, x);
  for (const auto& s : res[0].spans) {
    EXPECT_EQ(s.layer, 0);
    EXPECT_EQ(s.device, 0);
    if (s.name == "router") {
      EXPECT_EQ(s.flops, 2LL * 3 * 32 * 8 + 4LL * 3 * 8);
    }
    if (s.name == "expert_ffn") {
      EXPECT_GT(s.flops, 0);
    }
  }
}

// ---- the sigmoid grouped router (tiny-hybrid, seed 001 §3.5) ----

// Dense reference of one token through a sigmoid-routed MoE block, by
// sorting: s = sigmoid(x W_r); groups ranked by the sum of their two highest
// s + bias (stable, lower group first); the kept groups' experts ranked by
// s + bias; weights s / sum(s) * routed_scaling_factor; then the experts'
// outputs summed in rank order, plus the shared expert.
std::vector<float> SigmoidMoeReference(const ModelConfig& c, const LayerWeights& w,
                                       const std::vector<float>& x, std::vector<int>* ids) {
  const std::vector<float> logits = ref::MatVec(x, w.router, c.hidden, c.experts);
  const int gs = c.experts / c.n_group;
  std::vector<float> s(c.experts), b(c.experts);
  for (int e = 0; e < c.experts; ++e) {
    s[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    b[e] = s[e] + w.expert_bias[e];
  }
  std::vector<float> score(c.n_group);
  for (int g = 0; g < c.n_group; ++g) {
    std::vector<float> v(b.begin() + g * gs, b.begin() + (g + 1) * gs);
    std::sort(v.begin(), v.end(), std::greater<float>());
    score[g] = v[0] + v[1];
  }
  std::vector<int> groups(c.n_group);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](int a, int z) { return score[a] > score[z]; });
  std::vector<int> cand;
  for (int e = 0; e < c.experts; ++e) {
    if (std::find(groups.begin(), groups.begin() + c.topk_group, e / gs) !=
        groups.begin() + c.topk_group) {
      cand.push_back(e);
    }
  }
  std::stable_sort(cand.begin(), cand.end(), [&](int a, int z) { return b[a] > b[z]; });
  cand.resize(c.top_k);
  double sum = 0.0;
  for (int e : cand) sum += s[e];
  std::vector<double> acc(c.hidden, 0.0);
  for (int e : cand) {
    const double wt = (c.norm_topk_prob ? s[e] / sum : s[e]) * c.routed_scaling_factor;
    const std::vector<float> y = ref::Swiglu(w.experts[e], x);
    for (int i = 0; i < c.hidden; ++i) acc[i] += wt * y[i];
  }
  const std::vector<float> shared = ref::Swiglu(w.shared, x);
  std::vector<float> out(c.hidden);
  for (int i = 0; i < c.hidden; ++i) out[i] = static_cast<float>(acc[i] + shared[i]);
  *ids = cand;
  return out;
}

ModelConfig TinyHybrid() {
  ModelConfig c = PresetConfig("tiny-hybrid").value();
  EXPECT_EQ(c.router, RouterKind::kSigmoidGrouped);
  EXPECT_GT(c.routed_scaling_factor, 1.0f);  // so a missing or doubled scaling shows
  EXPECT_GT(c.n_group, c.topk_group);        // so group dropping matters
  return c;
}

constexpr int kMoeLayer = 1;  // tiny-hybrid's layer 0 is dense (first_k_dense_replace)

void ExpectMatchesSigmoidReference(const ModelConfig& c, const std::vector<std::vector<float>>& x,
                                   const std::vector<RankResult>& res,
                                   void (*patch)(LayerWeights&) = nullptr) {
  ModelWeights full = ref::FullWeights(c, 9);
  if (patch) patch(full.layers[kMoeLayer]);
  for (size_t r = 0; r < x.size(); ++r) {
    const int tokens = static_cast<int>(x[r].size()) / c.hidden;
    std::vector<int64_t> counts(c.experts, 0);
    for (int t = 0; t < tokens; ++t) {
      std::vector<float> xt(x[r].begin() + t * c.hidden, x[r].begin() + (t + 1) * c.hidden);
      std::vector<int> ids;
      const std::vector<float> want = SigmoidMoeReference(c, full.layers[kMoeLayer], xt, &ids);
      for (int e : ids) counts[e] += 1;
      for (int i = 0; i < c.hidden; ++i) {
        ASSERT_NEAR(res[r].out[t * c.hidden + i], want[i], 2e-5f) << "rank " << r << " token " << t;
      }
    }
    EXPECT_EQ(res[r].counts, counts) << "rank " << r;
  }
}

class EpMoeSigmoidTest : public ::testing::TestWithParam<int> {};  // P

TEST_P(EpMoeSigmoidTest, MatchesDenseReference) {
  const int p = GetParam();
  const ModelConfig c = TinyHybrid();
  std::vector<int> tokens = {7, 0, 4, 2};
  tokens.resize(p);
  if (p == 1) tokens[0] = 9;
  const auto x = Inputs(c, tokens);
  const auto res = RunEp(c, p, x, nullptr, kMoeLayer);
  ExpectMatchesSigmoidReference(c, x, res);
}

// Experts 4..7 (group 1) get bias +1 and all others 0: every token must pick
// exactly them (bias steers selection), while their weights still come from
// the unbiased scores (checked by the reference).
void FavourGroupOne(LayerWeights& w) {
  std::fill(w.expert_bias.begin(), w.expert_bias.end(), 0.0f);
  for (int e = 4; e < 8; ++e) w.expert_bias[e] = 1.0f;
}

TEST_P(EpMoeSigmoidTest, ExpertBiasSteersSelectionOnly) {
  const int p = GetParam();
  const ModelConfig c = TinyHybrid();
  ASSERT_EQ(c.top_k, 4);
  ASSERT_EQ(c.experts / c.n_group, 4);
  std::vector<int> tokens = {3, 2, 0, 5};
  tokens.resize(p);
  if (p == 1) tokens[0] = 6;
  const auto x = Inputs(c, tokens);
  const auto res = RunEp(c, p, x, FavourGroupOne, kMoeLayer);
  ExpectMatchesSigmoidReference(c, x, res, FavourGroupOne);
  for (int r = 0; r < p; ++r) {
    for (int e = 0; e < c.experts; ++e) {
      EXPECT_EQ(res[r].counts[e], e >= 4 && e < 8 ? tokens[r] : 0) << "rank " << r << " e " << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, EpMoeSigmoidTest, ::testing::Values(1, 4));

}  // namespace
}  // namespace sy::engine
