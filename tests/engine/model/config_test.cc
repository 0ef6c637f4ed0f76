#include "engine/model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ConfigTest, PresetNamesInDisplayOrder) {
  EXPECT_THAT(PresetNames(), ElementsAre("tiny", "small", "tiny-hybrid", "tiny-gla", "ling3-tiny"));
}

// Seed 001 §1.1: 24 layers in groups KDA, KDA, KDA, MLA; two head dims.
TEST(ConfigTest, Ling3TinyLayerPattern) {
  const ModelConfig c = PresetConfig("ling3-tiny").value();
  ASSERT_THAT(c.Validate(), IsOk());
  std::vector<int> mla;
  for (int l = 0; l < c.layers; ++l) {
    if (c.attention(l) == AttentionKind::kMla)
      mla.push_back(l);
    else
      EXPECT_EQ(c.attention(l), AttentionKind::kKda) << l;
  }
  EXPECT_THAT(mla, ElementsAre(3, 7, 11, 15, 19, 23));
  EXPECT_EQ(c.linear_head_dim, 128);
  EXPECT_EQ(c.mla_qk_head_dim(), 192);
  EXPECT_EQ(c.mla_latent_dim(), 576);
  EXPECT_EQ(c.kv_layer(7), 1);
  EXPECT_EQ(c.state_layer(4), 3);
  EXPECT_EQ(c.linear_layers(), 18);
  EXPECT_FALSE(c.is_moe(0));
  EXPECT_TRUE(c.is_moe(1));
}

TEST(ConfigTest, HybridRefusesInconsistentFieldsByName) {
  ModelConfig c = PresetConfig("tiny-hybrid").value();
  c.n_group = 3;  // does not divide 16 experts
  EXPECT_THAT(c.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'n_group'")));
  c = PresetConfig("tiny-hybrid").value();
  c.top_k = 12;  // more than the 2 kept groups of 4 hold
  EXPECT_THAT(c.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'top_k'")));
  c = PresetConfig("tiny-hybrid").value();
  c.qk_rope_head_dim = 31;
  EXPECT_THAT(c.Validate(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'qk_rope_head_dim'")));
}

TEST(ConfigTest, TinyPresetMatchesTheDocumentedShape) {
  Result<ModelConfig> c = PresetConfig("tiny");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name, "tiny");
  EXPECT_EQ(c->vocab, 260);
  EXPECT_EQ(c->hidden, 256);
  EXPECT_EQ(c->layers, 4);
  EXPECT_EQ(c->heads, 4);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->experts, 16);
  EXPECT_EQ(c->top_k, 2);
  EXPECT_EQ(c->max_seq, 1024);
  EXPECT_THAT(c->Validate(), IsOk());
}

TEST(ConfigTest, EveryPresetValidates) {
  for (const std::string& name : PresetNames()) {
    Result<ModelConfig> c = PresetConfig(name);
    ASSERT_THAT(c, IsOk()) << name;
    EXPECT_EQ(c->name, name);
    EXPECT_THAT(c->Validate(), IsOk()) << name;
  }
}

TEST(ConfigTest, UnknownPresetListsKnownNames) {
  EXPECT_THAT(PresetConfig("huge"),
              StatusIs(StatusCode::kNotFound,
                       AllOf(HasSubstr("'huge'"), HasSubstr("tiny"), HasSubstr("small"))));
}

TEST(ConfigTest, ParamCountOfTinyByHand) {
  const ModelConfig c = PresetConfig("tiny").value();
  const int64_t h = 256, v = 260;
  const int64_t attn = h * (256 + 2 * 256) + 256 * h;
  const int64_t moe = h * 16 + 16 * 3 * h * 256 + 3 * h * 256;
  const int64_t expected = 2 * v * h + h + 4 * (2 * h + attn + moe);
  EXPECT_EQ(c.ParamCount(), expected);
}

struct BadField {
  const char* field;
  void (*mutate)(ModelConfig&);
};

class ConfigValidateTest : public ::testing::TestWithParam<BadField> {};

TEST_P(ConfigValidateTest, NamesTheBadField) {
  ModelConfig c;
  GetParam().mutate(c);
  EXPECT_THAT(c.Validate(), StatusIs(StatusCode::kInvalidArgument,
                                     HasSubstr(std::string("'") + GetParam().field + "'")));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ConfigValidateTest,
    ::testing::Values(BadField{"vocab", [](ModelConfig& c) { c.vocab = 0; }},
                      BadField{"hidden", [](ModelConfig& c) { c.hidden = -3; }},
                      BadField{"layers", [](ModelConfig& c) { c.layers = 0; }},
                      BadField{"heads", [](ModelConfig& c) { c.heads = 0; }},
                      BadField{"kv_heads", [](ModelConfig& c) { c.kv_heads = 3; }},
                      BadField{"head_dim", [](ModelConfig& c) { c.head_dim = 63; }},
                      BadField{"experts", [](ModelConfig& c) { c.experts = 0; }},
                      BadField{"top_k", [](ModelConfig& c) { c.top_k = 17; }},
                      BadField{"top_k", [](ModelConfig& c) { c.top_k = 0; }},
                      BadField{"expert_inter", [](ModelConfig& c) { c.expert_inter = 0; }},
                      BadField{"shared_inter", [](ModelConfig& c) { c.shared_inter = -1; }},
                      BadField{"max_seq", [](ModelConfig& c) { c.max_seq = 0; }},
                      BadField{"rope_theta", [](ModelConfig& c) { c.rope_theta = 0.5f; }},
                      BadField{"rms_eps", [](ModelConfig& c) { c.rms_eps = 0.0f; }}));

TEST(ConfigTest, GroupedQueryAttentionIsAccepted) {
  ModelConfig c;
  c.kv_heads = 2;
  EXPECT_THAT(c.Validate(), IsOk());
}

}  // namespace
}  // namespace sy::engine
