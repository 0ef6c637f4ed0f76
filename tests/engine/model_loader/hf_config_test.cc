#include "engine/model_loader/hf_config.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "tests/engine/model_loader/test_util.h"

namespace sy::engine {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using testing::ExpectSameConfig;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

// The public Ling-3.0-tiny config.json, verbatim.
constexpr const char* kLing3TinyConfig =
    R"({"architectures":["BailingMoeV3ForCausalLM"],"model_type":"bailing_hybrid","hidden_size":1536,"intermediate_size":4608,"num_hidden_layers":24,"num_attention_heads":16,"num_key_value_heads":16,"head_dim":128,"vocab_size":157184,"max_position_embeddings":131072,"rms_norm_eps":1e-6,"rope_theta":6000000,"tie_word_embeddings":false,"layer_group_size":4,"short_conv_kernel_size":4,"no_kda_lora":true,"kda_safe_gate":true,"kda_lower_bound":-5,"gated_attention_proj_granularity_type":"head_wise","qk_head_dim":192,"qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,"q_lora_rank":256,"kv_lora_rank":512,"rope_interleave":true,"use_qk_norm":true,"first_k_dense_replace":1,"num_experts":128,"num_experts_per_tok":8,"num_shared_experts":1,"moe_intermediate_size":512,"moe_shared_expert_intermediate_size":512,"n_group":8,"topk_group":4,"norm_topk_prob":true,"routed_scaling_factor":2.5,"moe_router_enable_expert_bias":true,"num_nextn_predict_layers":1,"eos_token_id":156892,"score_function":"sigmoid","router_dtype":"fp32"})";

json Ling3() { return json::parse(kLing3TinyConfig); }

TEST(HfConfigTest, PublicLing3TinyConfigParses) {
  Result<ModelConfig> c = ParseHfConfig(Ling3());
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->arch, kArchBailingHybrid);
  EXPECT_EQ(c->hidden, 1536);
  EXPECT_EQ(c->layers, 24);
  EXPECT_EQ(c->heads, 16);
  EXPECT_EQ(c->linear_head_dim, 128);    // head_dim is the KDA head dim ...
  EXPECT_EQ(c->mla_qk_head_dim(), 192);  // ... not the MLA q/k dim
  EXPECT_EQ(c->kv_heads, 0);             // num_key_value_heads is ignored for MLA
  EXPECT_EQ(c->head_dim, 0);
  EXPECT_EQ(c->max_seq, 131072);
  EXPECT_EQ(c->rope_theta, 6000000.0f);
  EXPECT_EQ(c->eos_token, 156892);
  EXPECT_EQ(c->shared_inter, 512);
  EXPECT_EQ(c->mtp_layers, 1);
  EXPECT_EQ(c->router, RouterKind::kSigmoidGrouped);
  EXPECT_EQ(c->full_attention_layers(), 6);
  EXPECT_EQ(c->attention(3), AttentionKind::kMla);
  EXPECT_EQ(c->attention(4), AttentionKind::kKda);
  // Everything else is the ling3-tiny preset (which takes the seed's rope_theta and max_seq).
  ModelConfig want = PresetConfig("ling3-tiny").value();
  want.name = "";
  want.max_seq = 131072;
  want.rope_theta = 6000000.0f;
  ExpectSameConfig(*c, want);
}

TEST(HfConfigTest, EveryPresetRoundTrips) {
  for (const std::string& name : PresetNames()) {
    const ModelConfig p = PresetConfig(name).value();
    // Through the text, as a config.json file would carry it.
    Result<ModelConfig> c = ParseHfConfig(json::parse(ToHfConfig(p).dump()));
    ASSERT_THAT(c, IsOk()) << name;
    ExpectSameConfig(*c, p);
  }
}

TEST(HfConfigTest, RoundTripsWithoutQLoraAndWithMtp) {
  ModelConfig p = PresetConfig("tiny-hybrid").value();
  p.q_lora_rank = 0;
  p.mtp_layers = 2;
  p.mla_gate = false;
  const json j = ToHfConfig(p);
  EXPECT_TRUE(j["q_lora_rank"].is_null());
  Result<ModelConfig> c = ParseHfConfig(j);
  ASSERT_THAT(c, IsOk());
  ExpectSameConfig(*c, p);
}

TEST(HfConfigTest, AliasesAreReadAndMustAgree) {
  struct Alias {
    const char* canonical;
    const char* alias;
    json value;
    json other;
  };
  const std::vector<Alias> aliases = {
      {"num_experts_per_tok", "num_experts_per_token", 8, 4},
      {"n_group", "num_expert_group", 8, 4},
      {"norm_topk_prob", "moe_renormalize", true, false},
      {"score_function", "scoring_func", "sigmoid", "softmax"},
  };
  for (const Alias& a : aliases) {
    json j = Ling3();
    j.erase(a.canonical);
    j[a.alias] = a.value;
    EXPECT_THAT(ParseHfConfig(j), IsOk()) << a.alias;
    j[a.canonical] = a.value;
    EXPECT_THAT(ParseHfConfig(j), IsOk()) << a.alias << " agreeing";
    j[a.alias] = a.other;
    EXPECT_THAT(ParseHfConfig(j), StatusIs(StatusCode::kInvalidArgument,
                                           AllOf(HasSubstr(std::string("'") + a.canonical + "'"),
                                                 HasSubstr(std::string("'") + a.alias + "'"),
                                                 HasSubstr("contradict"))))
        << a.alias;
  }
  json j = Ling3();
  j.erase("score_function");
  j["moe_router_activation_func"] = "sigmoid";
  EXPECT_THAT(ParseHfConfig(j), IsOk());
  j["mla_use_nope"] = true;
  EXPECT_THAT(ParseHfConfig(j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'mla_use_nope' must be false")));
}

TEST(HfConfigTest, MissingRequiredFieldIsNamed) {
  for (const char* field : {"vocab_size",
                            "hidden_size",
                            "num_hidden_layers",
                            "num_attention_heads",
                            "max_position_embeddings",
                            "rope_theta",
                            "rms_norm_eps",
                            "eos_token_id",
                            "num_experts",
                            "num_experts_per_tok",
                            "moe_intermediate_size",
                            "layer_group_size",
                            "q_lora_rank",
                            "kv_lora_rank",
                            "qk_nope_head_dim",
                            "qk_rope_head_dim",
                            "v_head_dim",
                            "head_dim",
                            "short_conv_kernel_size",
                            "kda_lower_bound",
                            "intermediate_size",
                            "model_type"}) {
    json j = Ling3();
    j.erase(field);
    EXPECT_THAT(ParseHfConfig(j),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(std::string("'") + field + "'"), HasSubstr("missing"))))
        << field;
  }
}

TEST(HfConfigTest, WrongJsonTypeIsNamed) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"hidden_size", "1536"},    {"hidden_size", 1536.5}, {"rope_theta", "big"},
      {"norm_topk_prob", 1},      {"eos_token_id", "eos"}, {"eos_token_id", json::array()},
      {"q_lora_rank", "256"},     {"model_type", 7},       {"layer_group_size", nullptr},
      {"num_experts", 1LL << 40},
  };
  for (const auto& [field, value] : cases) {
    json j = Ling3();
    j[field] = value;
    EXPECT_THAT(ParseHfConfig(j),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(std::string("'") + field + "'")))
        << field << " = " << value.dump();
  }
  EXPECT_THAT(ParseHfConfig(json::array()), StatusIs(StatusCode::kInvalidArgument));
}

TEST(HfConfigTest, EosListTakesTheFirst) {
  json j = Ling3();
  j["eos_token_id"] = {156892, 156895};
  Result<ModelConfig> c = ParseHfConfig(j);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->eos_token, 156892);
}

TEST(HfConfigTest, NullQLoraRankMeansNoQLora) {
  json j = Ling3();
  j["q_lora_rank"] = nullptr;
  Result<ModelConfig> c = ParseHfConfig(j);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->q_lora_rank, 0);
}

TEST(HfConfigTest, QkHeadDimMustBeNopePlusRope) {
  json j = Ling3();
  j["qk_head_dim"] = 128;  // the KDA head dim mistaken for the MLA one
  EXPECT_THAT(ParseHfConfig(j),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'qk_head_dim'"), HasSubstr("is 128"), HasSubstr("192"))));
}

TEST(HfConfigTest, LinearAttnConfigMustAgreeWithTopLevelFields) {
  json j = Ling3();
  std::vector<int> kda, full;
  for (int i = 1; i <= 24; ++i) (i % 4 != 0 ? kda : full).push_back(i);
  j["linear_attn_config"] = {{"kda_layers", kda},
                             {"full_attn_layers", full},
                             {"head_dim", 128},
                             {"num_heads", 16},
                             {"short_conv_kernel_size", 4}};
  EXPECT_THAT(ParseHfConfig(j), IsOk());
  const std::vector<std::pair<const char*, json>> bad = {
      {"head_dim", 192},
      {"num_heads", 8},
      {"short_conv_kernel_size", 3},
      {"kda_layers", std::vector<int>{1, 2, 3}},
      {"full_attn_layers", std::vector<int>{3, 7}},
  };
  for (const auto& [key, value] : bad) {
    json k = j;
    k["linear_attn_config"][key] = value;
    EXPECT_THAT(ParseHfConfig(k),
                StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr(std::string("'linear_attn_config.") + key + "'")))
        << key;
  }
  // head_dim may come from linear_attn_config alone.
  json only = j;
  only.erase("head_dim");
  Result<ModelConfig> c = ParseHfConfig(only);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->linear_head_dim, 128);
}

TEST(HfConfigTest, PartialRotaryFactorMustGiveTheRopeDims) {
  json j = Ling3();
  j["partial_rotary_factor"] = 0.5;
  EXPECT_THAT(ParseHfConfig(j), IsOk());
  j["partial_rotary_factor"] = 0.25;
  EXPECT_THAT(ParseHfConfig(j),
              StatusIs(StatusCode::kInvalidArgument, AllOf(HasSubstr("'partial_rotary_factor'"),
                                                           HasSubstr("qk_rope_head_dim is 64"))));
}

TEST(HfConfigTest, ValuesWeCannotHonourAreRefused) {
  const std::vector<std::pair<const char*, json>> cases = {
      {"score_function", "softmax"},
      {"use_mla_nope", true},
      {"tie_word_embeddings", true},
      {"gated_attention_proj_granularity_type", "element_wise"},
      {"router_dtype", "bf16"},
      {"no_kda_lora", false},
      {"moe_router_enable_expert_bias", false},
      {"linear_attn_type", "mamba"},
      {"model_type", "llama"},
  };
  for (const auto& [field, value] : cases) {
    json j = Ling3();
    j[field] = value;
    EXPECT_THAT(ParseHfConfig(j),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(std::string("'") + field + "'")))
        << field;
  }
}

// Found by fuzzing (tests/fuzz/fuzz_hf_config; the inputs are kept as
// tests/fuzz/corpus/hf_config/regress_*): int overflows (UBSan), a layer
// list built for every one of 2^31 claimed layers (out of memory), floats
// that became infinities ToHfConfig cannot write, and 2^64 - 1 read as -1.
TEST(HfConfigTest, OutOfRangeValuesAreRefusedNotWrapped) {
  const std::vector<std::pair<json, const char*>> cases = {
      {{{"num_shared_experts", 65536}, {"moe_shared_expert_intermediate_size", 65536}},
       "'num_shared_experts' times moe_shared_expert_intermediate_size is out of range"},
      {{{"qk_nope_head_dim", 2147483647}, {"qk_rope_head_dim", 64}, {"qk_head_dim", 1}},
       "'qk_head_dim' is 1 but qk_nope_head_dim + qk_rope_head_dim is 2147483711"},
      {{{"qk_nope_head_dim", 2147483647}, {"qk_rope_head_dim", 64}, {"qk_head_dim", nullptr}},
       "'qk_nope_head_dim' plus qk_rope_head_dim is out of range"},
      {{{"num_hidden_layers", 2147483647}, {"linear_attn_config", {{"kda_layers", {1, 2, 3}}}}},
       "'linear_attn_config.kda_layers' is [1,2,3] but num_hidden_layers and layer_group_size "
       "give 1610612733 layers"},
      {{{"routed_scaling_factor", 1e39}}, "'routed_scaling_factor' is out of range for a float"},
      {{{"kda_safe_gate", false}, {"kda_lower_bound", -1e39}},
       "'kda_lower_bound' is out of range for a float"},
      {{{"num_nextn_predict_layers", 18446744073709551615ULL}},
       "'num_nextn_predict_layers' is out of range: 18446744073709551615"},
      {{{"eos_token_id", 18446744073709551615ULL}}, "'eos_token_id' must be an integer"},
  };
  for (const auto& [change, message] : cases) {
    json j = Ling3();
    j.update(change);
    for (const auto& [key, value] : change.items()) {
      if (value.is_null()) j.erase(key);  // null: leave the field out
    }
    EXPECT_THAT(ParseHfConfig(j), StatusIs(StatusCode::kInvalidArgument, HasSubstr(message)))
        << change.dump();
  }
}

TEST(HfConfigTest, ValidateErrorsPointAtTheConfigJsonField) {
  json j = Ling3();
  j["n_group"] = 3;  // does not divide 128 experts
  EXPECT_THAT(ParseHfConfig(j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("field 'n_group' must divide")));
  j = Ling3();
  j["num_experts_per_tok"] = 0;
  EXPECT_THAT(ParseHfConfig(j),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("field 'top_k'"),
                             HasSubstr("config.json field 'num_experts_per_tok'"))));
  j = Ling3();
  j["eos_token_id"] = 157184;
  EXPECT_THAT(ParseHfConfig(j), StatusIs(StatusCode::kInvalidArgument,
                                         HasSubstr("config.json field 'eos_token_id'")));
}

TEST(HfConfigTest, FoundationArchHasHfStyleDefaults) {
  const json j = {{"model_type", "switchyard_moe"},
                  {"hidden_size", 256},
                  {"num_hidden_layers", 2},
                  {"num_attention_heads", 4},
                  {"vocab_size", 260},
                  {"max_position_embeddings", 512},
                  {"rope_theta", 10000},
                  {"rms_norm_eps", 1e-5},
                  {"eos_token_id", 257},
                  {"num_experts", 8},
                  {"num_experts_per_tok", 2},
                  {"moe_intermediate_size", 64}};
  Result<ModelConfig> c = ParseHfConfig(j);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->arch, kArchMoe);
  EXPECT_EQ(c->kv_heads, 4);   // num_key_value_heads defaults to the heads
  EXPECT_EQ(c->head_dim, 64);  // head_dim to hidden / heads
  EXPECT_EQ(c->shared_inter, 0);
  EXPECT_EQ(c->router, RouterKind::kSoftmax);
  json bad = j;
  bad["num_key_value_heads"] = 3;
  EXPECT_THAT(ParseHfConfig(bad), StatusIs(StatusCode::kInvalidArgument,
                                           HasSubstr("config.json field 'num_key_value_heads'")));
}

TEST(HfConfigTest, LoadNamesTheConfigAfterItsDirectory) {
  TempDir dir;
  const std::string sub = dir / "my-model";
  std::filesystem::create_directory(sub);
  WriteFile(sub + "/config.json", kLing3TinyConfig);
  Result<ModelConfig> c = LoadHfConfig(sub + "/config.json");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name, "my-model");
  EXPECT_THAT(LoadHfConfig(dir / "none.json"),
              StatusIs(StatusCode::kNotFound, HasSubstr("none.json")));
  WriteFile(dir / "bad.json", "{\"model_type\": ");
  EXPECT_THAT(
      LoadHfConfig(dir / "bad.json"),
      StatusIs(StatusCode::kInvalidArgument, AllOf(HasSubstr("bad.json"), HasSubstr("JSON"))));
  json j = Ling3();
  j.erase("num_experts");
  WriteFile(dir / "missing.json", j.dump());
  EXPECT_THAT(LoadHfConfig(dir / "missing.json"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("missing.json"), HasSubstr("'num_experts'"))));
}

}  // namespace
}  // namespace sy::engine
