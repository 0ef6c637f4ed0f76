#include "engine/model/weights.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sy::engine {
namespace {

ModelConfig SmallConfig() {
  ModelConfig c;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.experts = 4;
  c.top_k = 2;
  c.expert_inter = 24;
  c.shared_inter = 16;
  return c;
}

TEST(WeightsTest, SameSeedSameValues) {
  const ModelConfig c = SmallConfig();
  const ModelWeights a = BuildWeights(c, 7, {0, 1, 2, 3});
  const ModelWeights b = BuildWeights(c, 7, {0, 1, 2, 3});
  EXPECT_EQ(a.embed, b.embed);
  EXPECT_EQ(a.lm_head, b.lm_head);
  EXPECT_EQ(a.layers[1].wqkv, b.layers[1].wqkv);
  EXPECT_EQ(a.layers[1].experts[3].down, b.layers[1].experts[3].down);
}

TEST(WeightsTest, DifferentSeedDiffers) {
  const ModelConfig c = SmallConfig();
  const ModelWeights a = BuildWeights(c, 7, {0});
  const ModelWeights b = BuildWeights(c, 8, {0});
  EXPECT_NE(a.embed, b.embed);
  EXPECT_NE(a.layers[0].experts[0].gate_up, b.layers[0].experts[0].gate_up);
}

TEST(WeightsTest, ShardHoldsExactlyItsExpertsWithTheFullModelsValues) {
  const ModelConfig c = SmallConfig();
  const ModelWeights full = BuildWeights(c, 3, {0, 1, 2, 3});
  const ModelWeights shard = BuildWeights(c, 3, {1, 3});
  for (int l = 0; l < c.layers; ++l) {
    EXPECT_FALSE(shard.layers[l].experts[0].present());
    EXPECT_FALSE(shard.layers[l].experts[2].present());
    ASSERT_TRUE(shard.layers[l].experts[1].present());
    EXPECT_EQ(shard.layers[l].experts[1].gate_up, full.layers[l].experts[1].gate_up);
    EXPECT_EQ(shard.layers[l].experts[3].down, full.layers[l].experts[3].down);
    EXPECT_EQ(shard.layers[l].router, full.layers[l].router);
    EXPECT_EQ(shard.layers[l].shared.gate_up, full.layers[l].shared.gate_up);
  }
}

TEST(WeightsTest, ShapesAndScale) {
  const ModelConfig c = SmallConfig();
  const ModelWeights w = BuildWeights(c, 1, {0, 1, 2, 3});
  EXPECT_EQ(w.embed.size(), static_cast<size_t>(c.vocab) * c.hidden);
  EXPECT_EQ(w.lm_head.size(), static_cast<size_t>(c.hidden) * c.vocab);
  EXPECT_EQ(w.layers[0].wqkv.size(), static_cast<size_t>(c.hidden) * 3 * 32);
  EXPECT_EQ(w.layers[0].experts[0].gate_up.size(), static_cast<size_t>(c.hidden) * 2 * 24);
  EXPECT_EQ(w.layers[0].experts[0].down.size(), static_cast<size_t>(24) * c.hidden);
  EXPECT_EQ(w.layers[0].shared.inter, 16);
  // Variance of a fan-in-32 matrix is ~1/32; of the embedding ~1/3.
  double ss = 0.0;
  for (float v : w.layers[0].wqkv) ss += v * v;
  EXPECT_NEAR(ss / w.layers[0].wqkv.size(), 1.0 / 32, 0.2 / 32);
  double se = 0.0;
  for (float v : w.embed) se += v * v;
  EXPECT_NEAR(se / w.embed.size(), 1.0 / 3, 0.03);
  for (float g : w.final_norm) EXPECT_NEAR(g, 1.0f, 0.1f);
}

TEST(WeightsTest, FillTensorIsUniformInRange) {
  std::vector<float> v(10000);
  FillTensor(5, "t", 2.0f, 1.0f, v.data(), v.size());
  double sum = 0.0;
  for (float x : v) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 3.0f);
    sum += x;
  }
  EXPECT_NEAR(sum / v.size(), 1.0, 0.05);
  std::vector<float> other(10000);
  FillTensor(5, "u", 2.0f, 1.0f, other.data(), other.size());
  EXPECT_NE(v, other);  // the name keys the stream
}

}  // namespace
}  // namespace sy::engine
