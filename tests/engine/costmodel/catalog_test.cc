// The catalogue: every shipped data file parses and says what the seeds say;
// bad files and unknown names fail with precise errors; an HF config.json
// becomes the same spec as the catalogue's.
#include "engine/costmodel/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/status_matchers.h"
#include "engine/model_loader/hf_config.h"

namespace sy::engine::costmodel {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Catalog, ListsTheShippedFiles) {
  EXPECT_THAT(HardwareNames(DefaultCatalogDir()), ElementsAre("b200", "h100", "h200", "tpu-v7x"));
  EXPECT_THAT(ModelNames(DefaultCatalogDir()),
              ElementsAre("deepseek-v3", "ling-2.6-1t", "ling3-tiny", "qwen3-235b-a22b"));
  for (const std::string& n : HardwareNames(DefaultCatalogDir())) {
    EXPECT_THAT(LoadHardware(DefaultCatalogDir(), n), IsOk()) << n;
  }
  for (const std::string& n : ModelNames(DefaultCatalogDir())) {
    EXPECT_THAT(LoadModel(DefaultCatalogDir(), n), IsOk()) << n;
  }
}

TEST(Catalog, TpuV7xPerDeviceFiguresOfSeed000) {
  Result<HardwareSpec> h = LoadHardware(DefaultCatalogDir(), "tpu-v7x");
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(h->devices_per_chip, 2);
  EXPECT_DOUBLE_EQ(h->peak_flops(Dtype::kFp8), 2.307e15);  // per device
  EXPECT_DOUBLE_EQ(h->hbm_bandwidth(), 3.69e12);
  EXPECT_EQ(h->topology, Topology::kTorus);
}

TEST(Catalog, ModelShapes) {
  Result<ModelSpec> q = LoadModel(DefaultCatalogDir(), "qwen3-235b-a22b");
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ(q->layers, 94);
  EXPECT_EQ(q->hidden, 4096);
  EXPECT_EQ(q->kv_heads, 4);
  EXPECT_EQ(q->expert_inter, 1536);
  EXPECT_EQ(q->moe_layers(), 94);
  Result<ModelSpec> ling = LoadModel(DefaultCatalogDir(), "ling-2.6-1t");
  ASSERT_THAT(ling, IsOk());
  EXPECT_EQ(ling->full_attention_layers(), 10);  // seed 000: 10 MLA + 70 GLA
  EXPECT_EQ(ling->linear_layers(), 70);
}

TEST(Catalog, UnknownNamesListTheKnownOnes) {
  EXPECT_THAT(LoadHardware(DefaultCatalogDir(), "a100"),
              StatusIs(StatusCode::kNotFound, HasSubstr("known: b200, h100, h200, tpu-v7x")));
  EXPECT_THAT(LoadHardware(DefaultCatalogDir(), "../models/deepseek-v3"),
              StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(LoadModel(DefaultCatalogDir(), "llama"),
              StatusIs(StatusCode::kNotFound, HasSubstr("known: deepseek-v3, ling-2.6-1t")));
}

TEST(Catalog, BadFilesNameTheField) {
  const std::string ok = R"({"name": "x", "devices_per_chip": 1,
    "peak_flops_per_chip": {"bf16": 1e15, "fp8": 2e15}, "hbm_bandwidth_per_chip": 3e12,
    "hbm_capacity_per_chip": 8e10,
    "interconnect": {"kind": "switch", "links_per_chip": 18, "link_bandwidth_per_direction": 2.5e10}})";
  EXPECT_THAT(ParseHardwareJson(ok, "x.json"), IsOk());
  std::string bad = ok;
  bad.replace(bad.find("\"switch\""), 8, "\"ring\"");
  EXPECT_THAT(ParseHardwareJson(bad, "x.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'interconnect.kind'")));
  bad = ok;
  bad.replace(bad.find("3e12"), 4, "-3e12");
  EXPECT_THAT(ParseHardwareJson(bad, "x.json"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("x.json: field 'hbm_bandwidth_per_chip' must be > 0")));
  EXPECT_THAT(ParseHardwareJson("{", "x.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseModelJson(R"({"name": "m", "layers": 2})", "m.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'hidden' is missing")));
  EXPECT_THAT(ParseModelJson(R"({"name": "m", "layers": 2, "hidden": 8, "vocab": 8, "heads": 2,
      "attention": "mha", "kv_heads": 2, "head_dim": 4, "experts": 4, "top_k": 8,
      "expert_inter": 8})",
                             "m.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("top_k")));
}

// "measured_kernels" and "interconnect.collective_latency_us" (catalog.h
// KernelProfile): optional, each field checked and named when wrong.
TEST(Catalog, MeasuredKernelsAndCollectiveLatency) {
  Result<HardwareSpec> h200 = LoadHardware(DefaultCatalogDir(), "h200");
  ASSERT_THAT(h200, IsOk());
  EXPECT_FALSE(h200->measured.empty());
  EXPECT_GT(h200->measured.attention.floor_us, 0);
  EXPECT_GT(h200->measured.router.floor_us, 0);
  EXPECT_GT(h200->measured.per_expert_us, 0);
  EXPECT_GT(h200->measured.half_width, 0);
  EXPECT_TRUE(h200->measured.serial);
  EXPECT_GT(h200->all_to_all_latency_us, 0);
  Result<HardwareSpec> tpu = LoadHardware(DefaultCatalogDir(), "tpu-v7x");
  ASSERT_THAT(tpu, IsOk());
  EXPECT_TRUE(tpu->measured.empty());
  EXPECT_EQ(tpu->all_to_all_latency_us, 0);

  const std::string head = R"({"name": "x", "devices_per_chip": 1,
    "peak_flops_per_chip": {"bf16": 1e15, "fp8": 2e15}, "hbm_bandwidth_per_chip": 3e12,
    "hbm_capacity_per_chip": 8e10, "interconnect": {"kind": "switch", "links_per_chip": 18,
    "link_bandwidth_per_direction": 2.5e10, "collective_latency_us": {"all_to_all": 12}})";
  auto parse = [&](const std::string& rest) {
    return ParseHardwareJson(head + rest + "}", "x.json");
  };
  Result<HardwareSpec> ok = parse(R"(, "measured_kernels": {"source": "timed",
      "attention": {"floor_us": 50, "hbm": 0.8}, "expert_ffn": {"overlap": "serial"}})");
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(ok->all_to_all_latency_us, 12);
  EXPECT_EQ(ok->allreduce_latency_us, 0);
  EXPECT_EQ(ok->measured.attention.floor_us, 50);
  EXPECT_EQ(ok->measured.attention.compute, 1.0);  // absent: 1
  EXPECT_EQ(ok->measured.router.floor_us, 0);
  EXPECT_THAT(parse(R"(, "measured_kernels": {"attention": {"floor_us": 50}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'measured_kernels.source'")));
  EXPECT_THAT(
      parse(R"(, "measured_kernels": {"source": "t", "router": {"hbm": 1.5}})"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("field 'measured_kernels.router.hbm' must be in (0, 1], got 1.5")));
  EXPECT_THAT(parse(R"(, "measured_kernels": {"source": "t", "expert_ffn": {"floor_us": -1}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("must be >= 0")));
  EXPECT_THAT(parse(R"(, "measured_kernels": {"source": "t", "expert_ffn": {"overlap": "x"}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"max\" or \"serial\"")));
  std::string neg = head;
  neg.replace(neg.find("12}"), 3, "-2}");
  EXPECT_THAT(ParseHardwareJson(neg + "}", "x.json"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'interconnect.collective_latency_us.all_to_all'")));
}

TEST(Catalog, HfConfigBecomesTheSameSpec) {
  Result<ModelConfig> preset = PresetConfig("ling3-tiny");
  ASSERT_THAT(preset, IsOk());
  const fs::path dir = fs::path(testing::TempDir()) / "costmodel_hf" / "ling3-tiny";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << ToHfConfig(*preset).dump(2);
  Result<ModelSpec> from_hf = LoadModel(DefaultCatalogDir(), dir.string());
  Result<ModelSpec> cat = LoadModel(DefaultCatalogDir(), "ling3-tiny");
  ASSERT_THAT(from_hf, IsOk());
  ASSERT_THAT(cat, IsOk());
  EXPECT_EQ(from_hf->name, "ling3-tiny");
  for (auto f : {&ModelSpec::layers, &ModelSpec::hidden, &ModelSpec::vocab, &ModelSpec::heads,
                 &ModelSpec::q_lora_rank, &ModelSpec::kv_lora_rank, &ModelSpec::qk_nope_head_dim,
                 &ModelSpec::qk_rope_head_dim, &ModelSpec::v_head_dim, &ModelSpec::layer_group_size,
                 &ModelSpec::linear_head_dim, &ModelSpec::experts, &ModelSpec::top_k,
                 &ModelSpec::expert_inter, &ModelSpec::shared_experts, &ModelSpec::shared_inter,
                 &ModelSpec::dense_layers, &ModelSpec::dense_inter}) {
    EXPECT_EQ((*from_hf).*f, (*cat).*f);
  }
  EXPECT_EQ(from_hf->attention, AttentionKind::kMla);
  EXPECT_EQ(from_hf->linear, AttentionKind::kKda);
  // The file itself works too; a path that is neither fails like a bad name.
  EXPECT_THAT(LoadModel(DefaultCatalogDir(), (dir / "config.json").string()), IsOk());
  EXPECT_THAT(LoadModel(DefaultCatalogDir(), (dir / "nope").string()),
              StatusIs(StatusCode::kNotFound));
}

}  // namespace
}  // namespace sy::engine::costmodel
