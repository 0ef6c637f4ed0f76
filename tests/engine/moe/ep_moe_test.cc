#include "engine/moe/ep_moe.h"

#include <gtest/gtest.h>

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
                              void (*patch)(LayerWeights&) = nullptr) {
  const ExpertLayout layout = ExpertLayout::RoundRobin(c.experts, p);
  InProcCommunicator comm(p);
  std::vector<RankResult> res(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      ModelWeights w = BuildWeights(c, 9, layout.local_experts(r));
      if (patch) patch(w.layers[0]);
      SpanRecorder rec(r, SpanRecorder::Clock::now());
      rec.Reset(TraceLevel::kFull);
      EpMoeLayer moe(c, r, &layout, &comm);
      const int tokens = static_cast<int>(x[r].size()) / c.hidden;
      res[r].out.assign(x[r].size(), -1.0f);
      res[r].counts.assign(c.experts, 0);
      // Two rounds: the second must not see leftovers from the first.
      moe.Forward(0, w.layers[0], x[r].data(), tokens, res[r].out.data(), &rec,
                  res[r].counts.data());
      res[r].counts.assign(c.experts, 0);
      moe.Forward(0, w.layers[0], x[r].data(), tokens, res[r].out.data(), &rec,
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

}  // namespace
}  // namespace sy::engine
