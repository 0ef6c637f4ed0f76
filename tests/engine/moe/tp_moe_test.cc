// TpMoeLayer against EpMoeLayer on the same tokens and the same weights: the
// outputs must be bit-identical (the per-(token, k) all-reduce and EP's
// sliced expert FFN, tp_moe.h), on 1, 2 and 4 ranks, with idle ranks, with
// expert row counts on both GEMM paths (<= and > kSmallGemmRows), with both
// routers and with skewed routing. Also against the single-device reference.
#include "engine/moe/tp_moe.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "engine/distributed/inproc_communicator.h"
#include "engine/moe/ep_moe.h"
#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

ModelConfig MoeConfig(bool sigmoid) {
  // The grouped sigmoid router belongs to the hybrid (Ling) architecture, so
  // that config starts from tiny-hybrid to stay valid (BuildWeights checks);
  // only layer 0's MoE block is used, sized the same either way.
  ModelConfig c;
  if (sigmoid) {
    Result<ModelConfig> hybrid = PresetConfig("tiny-hybrid");
    EXPECT_TRUE(hybrid.ok());
    if (hybrid.ok()) c = *hybrid;
    c.first_k_dense_replace = 0;
    c.mtp_layers = 0;
  }
  c.hidden = 32;
  c.layers = 1;
  c.heads = 2;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.experts = 8;
  c.top_k = 3;
  c.expert_inter = 24;  // s = 6 on 4 ranks: GEMM column tails on both layouts
  c.shared_inter = 24;
  if (sigmoid) {
    c.router = RouterKind::kSigmoidGrouped;
    c.n_group = 4;
    c.topk_group = 2;
    c.routed_scaling_factor = 2.5f;
  }
  return c;
}

struct LayoutRun {
  std::vector<std::vector<float>> out;       // per rank [tokens x H]
  std::vector<std::vector<int64_t>> counts;  // per rank [experts]
  std::vector<int64_t> allreduce_floats;
};

// Rank r's TP slice of every expert, cut from the full weights by hand
// (independent of the UnifiedExpertBuffer's reshard).
struct Slices {
  std::vector<std::vector<float>> gate_up, down;  // per expert
  std::vector<TpSliceView> views;
};

Slices Cut(const ModelConfig& c, const LayerWeights& full, int rank, int p) {
  const int h = c.hidden, inter = c.expert_inter, s = inter / p;
  Slices out;
  out.gate_up.resize(c.experts);
  out.down.resize(c.experts);
  for (int e = 0; e < c.experts; ++e) {
    const SwigluWeights& w = full.experts[e];
    out.gate_up[e].resize(static_cast<size_t>(h) * 2 * s);
    for (int k = 0; k < h; ++k) {
      const float* row = &w.gate_up[static_cast<size_t>(k) * 2 * inter];
      std::memcpy(&out.gate_up[e][static_cast<size_t>(k) * 2 * s], row + rank * s, s * 4);
      std::memcpy(&out.gate_up[e][static_cast<size_t>(k) * 2 * s + s], row + inter + rank * s,
                  s * 4);
    }
    out.down[e].assign(w.down.begin() + static_cast<size_t>(rank) * s * h,
                       w.down.begin() + static_cast<size_t>(rank + 1) * s * h);
  }
  for (int e = 0; e < c.experts; ++e) {
    out.views.push_back({.gate_up = out.gate_up[e].data(), .down = out.down[e].data(), .shard = s});
  }
  return out;
}

LayoutRun RunLayout(const ModelConfig& c, int p, const std::vector<std::vector<float>>& x, bool tp,
                    RouterSkew skew = {}) {
  const ExpertMap map = ExpertMap::RoundRobin(1, 0, c.experts, p);
  InProcCommunicator comm(p);
  LayoutRun res;
  res.out.resize(p);
  res.counts.resize(p);
  res.allreduce_floats.resize(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      ModelWeights w = tp ? ref::FullWeights(c, 9) : BuildWeights(c, 9, map.ExpertsOnDevice(r));
      const int tokens = static_cast<int>(x[r].size()) / c.hidden;
      res.out[r].assign(x[r].size(), -1.0f);
      res.counts[r].assign(c.experts, 0);
      SpanRecorder rec(r, SpanRecorder::Clock::now());
      if (tp) {
        const Slices sl = Cut(c, w.layers[0], r, p);
        TpMoeLayer moe(c, r, &comm, skew);
        moe.set_step(7);
        // Twice: the second must not see leftovers of the first.
        for (int round = 0; round < 2; ++round) {
          res.counts[r].assign(c.experts, 0);
          moe.Forward(0, w.layers[0], sl.views.data(), x[r].data(), tokens, res.out[r].data(), &rec,
                      res.counts[r].data());
        }
        res.allreduce_floats[r] = moe.last_allreduce_floats();
      } else {
        EpMoeLayer moe(c, r, &map, &comm, skew);
        moe.set_step(7);
        moe.Forward(0, w.layers[0], x[r].data(), tokens, res.out[r].data(), &rec,
                    res.counts[r].data());
      }
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

std::vector<std::vector<float>> Inputs(const ModelConfig& c, const std::vector<int>& tokens) {
  std::vector<std::vector<float>> x;
  for (size_t r = 0; r < tokens.size(); ++r) {
    x.emplace_back(static_cast<size_t>(tokens[r]) * c.hidden);
    FillTensor(200 + r, "x", 1.0f, 0.0f, x.back().data(), x.back().size());
  }
  return x;
}

// P, sigmoid router, skew.
class TpMoeTest : public ::testing::TestWithParam<std::tuple<int, bool, bool>> {};

TEST_P(TpMoeTest, OutputsEqualEpBitwiseAndMatchTheReference) {
  const auto [p, sigmoid, skewed] = GetParam();
  const ModelConfig c = MoeConfig(sigmoid);
  const RouterSkew skew{.skew = skewed ? 2.0 : 0.0, .drift_steps = 3};
  // Decode-sized and prefill-sized batches: small per-expert row counts use
  // the streaming kernel, large ones sgemm; rank 1 is idle.
  for (const std::vector<int>& per_rank :
       {std::vector<int>{3, 0, 1, 2}, std::vector<int>{60, 0, 45, 17}}) {
    std::vector<int> tokens(per_rank.begin(), per_rank.begin() + p);
    if (p == 1) tokens[0] = per_rank[0] + per_rank[2];
    const auto x = Inputs(c, tokens);
    const LayoutRun ep = RunLayout(c, p, x, /*tp=*/false, skew);
    const LayoutRun tp = RunLayout(c, p, x, /*tp=*/true, skew);
    int64_t total = 0;
    for (int t : tokens) total += t;
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(tp.out[r].size(), ep.out[r].size());
      EXPECT_EQ(std::memcmp(tp.out[r].data(), ep.out[r].data(), ep.out[r].size() * 4), 0)
          << "rank " << r << " of " << p << ": TP differs from EP";
      EXPECT_EQ(tp.counts[r], ep.counts[r]) << "rank " << r;
      EXPECT_EQ(tp.allreduce_floats[r], total * c.top_k * c.hidden);
    }
    if (skewed || sigmoid) continue;  // the reference routes by softmax, unskewed
    ModelWeights full = ref::FullWeights(c, 9);
    for (int r = 0; r < p; ++r) {
      for (int t = 0; t < tokens[r]; ++t) {
        std::vector<float> xt(x[r].begin() + t * c.hidden, x[r].begin() + (t + 1) * c.hidden);
        const std::vector<float> want = ref::Moe(c, full.layers[0], xt);
        for (int i = 0; i < c.hidden; ++i) {
          ASSERT_NEAR(tp.out[r][t * c.hidden + i], want[i], 1e-4f) << "rank " << r << " t " << t;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TpMoeTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Bool(),
                                            ::testing::Bool()));

TEST(TpMoeSpanTest, EveryRankJoinsTheGatherAndTheAllReduce) {
  const ModelConfig c = MoeConfig(false);
  const auto x = Inputs(c, {2, 0});
  InProcCommunicator comm(2);
  std::vector<std::vector<telemetry::Span>> spans(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ModelWeights w = ref::FullWeights(c, 9);
      const Slices sl = Cut(c, w.layers[0], r, 2);
      SpanRecorder rec(r, SpanRecorder::Clock::now());
      rec.Reset(TraceLevel::kFull);
      TpMoeLayer moe(c, r, &comm);
      std::vector<float> out(x[r].size());
      moe.Forward(0, w.layers[0], sl.views.data(), x[r].data(), static_cast<int>(x[r].size()) / 32,
                  out.data(), &rec, nullptr);
      spans[r] = rec.spans();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    int gather = 0, reduce = 0, ffn = 0;
    int64_t reduce_bytes = -1;
    for (const auto& s : spans[r]) {
      gather += s.name == "tp_gather";
      ffn += s.name == "expert_ffn";
      if (s.name == "tp_allreduce") {
        ++reduce;
        reduce_bytes = s.bytes;
      }
    }
    EXPECT_EQ(gather, 1) << r;
    EXPECT_EQ(reduce, 1) << r;
    EXPECT_EQ(ffn, 1) << r;  // the idle rank computes its slice of rank 0's tokens
    // Per-(token, k) partials: 2 tokens x top_k 3 x H 32 floats to the one peer.
    EXPECT_EQ(reduce_bytes, 2LL * 3 * 32 * 4) << r;
  }
}

}  // namespace
}  // namespace sy::engine
