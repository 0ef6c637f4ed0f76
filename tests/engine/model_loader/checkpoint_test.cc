#include "engine/model_loader/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/status_matchers.h"
#include "engine/model_loader/hf_config.h"
#include "tests/engine/model_loader/test_util.h"

namespace sy::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::AllExperts;
using ::testing::AllOf;
using ::testing::Contains;
using testing::ExpectSameConfig;
using testing::ExpectSameSwiglu;
using testing::ExpectSameVec;
using testing::ExpectSameWeights;
using ::testing::HasSubstr;
using testing::kSeed;
using testing::MiniHybrid;
using testing::OpenOk;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TEST(CheckpointTest, F32RoundTripIsBitIdenticalForEveryTinyPreset) {
  for (const char* name : {"tiny", "tiny-hybrid", "tiny-gla"}) {
    TempDir tmp;
    const ModelConfig c = PresetConfig(name).value();
    const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
    const std::string dir = tmp / "ckpt";
    ASSERT_THAT(WriteCheckpoint(c, w, dir, DType::kF32), IsOk()) << name;
    std::unique_ptr<Checkpoint> ck = OpenOk(dir);
    ASSERT_NE(ck, nullptr) << name;
    ModelConfig want = c;
    want.name = "ckpt";  // a loaded config is named after its directory
    ExpectSameConfig(ck->config(), want);
    EXPECT_TRUE(ck->skipped().empty());
    Result<ModelWeights> got = ck->Load(AllExperts(c));
    ASSERT_THAT(got, IsOk()) << name;
    SCOPED_TRACE(name);
    ExpectSameWeights(*got, w);
  }
}

TEST(CheckpointTest, LoadFillsOnlyTheLocalExperts) {
  TempDir tmp;
  const ModelConfig c = MiniHybrid();
  ASSERT_THAT(WriteCheckpoint(c, BuildWeights(c, kSeed, AllExperts(c)), tmp / "ck", DType::kF32),
              IsOk());
  std::unique_ptr<Checkpoint> ck = OpenOk(tmp / "ck/");  // a trailing slash changes nothing
  ASSERT_NE(ck, nullptr);
  EXPECT_EQ(ck->config().name, "ck");
  Result<ModelWeights> got = ck->Load({1, 6});
  ASSERT_THAT(got, IsOk());
  ExpectSameWeights(*got, BuildWeights(c, kSeed, {1, 6}));
  EXPECT_FALSE(got->layers[1].experts[0].present());
  EXPECT_TRUE(got->layers[1].experts[6].present());
  EXPECT_THAT(ck->Load({8}), StatusIs(StatusCode::kInvalidArgument, HasSubstr("expert id 8")));
}

TEST(CheckpointTest, DevicesLoadTheirShardsConcurrently) {
  TempDir tmp;
  const ModelConfig c = MiniHybrid();
  ASSERT_THAT(WriteCheckpoint(c, BuildWeights(c, kSeed, AllExperts(c)), tmp / "ck", DType::kBF16),
              IsOk());
  std::unique_ptr<Checkpoint> ck = OpenOk(tmp / "ck");
  ASSERT_NE(ck, nullptr);
  constexpr int kDevices = 4;
  std::vector<Result<ModelWeights>> got(kDevices, Internal("not loaded"));
  std::vector<std::thread> threads;
  for (int d = 0; d < kDevices; ++d) {
    threads.emplace_back([&, d] { got[d] = ck->Load({2 * d, 2 * d + 1}); });
  }
  for (std::thread& t : threads) t.join();
  const ModelWeights all = ck->Load(AllExperts(c)).value();
  for (int d = 0; d < kDevices; ++d) {
    ASSERT_THAT(got[d], IsOk());
    ExpectSameVec(got[d]->embed, all.embed, "embed");
    for (int e = 0; e < c.experts; ++e) {
      const bool local = e / 2 == d;
      EXPECT_EQ(got[d]->layers[2].experts[e].present(), local);
      if (local) ExpectSameSwiglu(got[d]->layers[2].experts[e], all.layers[2].experts[e], "expert");
    }
  }
}

// The layout is checked against the raw tensors too, so a loader and writer
// that agreed on a wrong mapping would not pass by symmetry.
TEST(CheckpointTest, TensorsHaveTheHfNamesShapesAndLayout) {
  TempDir tmp;
  const ModelConfig c = MiniHybrid();
  const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
  ASSERT_THAT(WriteCheckpoint(c, w, tmp / "ck", DType::kF32), IsOk());
  const json index = json::parse(ReadFile(tmp / "ck/model.safetensors.index.json"));
  auto tensor =
      [&](const std::string& name) -> std::pair<std::vector<int64_t>, std::vector<float>> {
    const std::string file = index["weight_map"].value(name, "");
    EXPECT_FALSE(file.empty()) << name;
    auto f = SafetensorsFile::Open(tmp / ("ck/" + file)).value();
    const TensorView* t = f->Find(name);
    std::vector<float> v(t->elements());
    ToFloat(*t, v.data());
    return {t->shape, v};
  };
  const int64_t h = c.hidden, heads = c.heads, d = c.linear_head_dim, dd = heads * d;
  const int64_t k = c.conv_kernel, inter = c.dense_inter;
  // KDA (layer 0): q_proj [D, H] is our q [H x D] transposed.
  auto [qs, q] = tensor("model.layers.0.attention.q_proj.weight");
  EXPECT_EQ(qs, (std::vector<int64_t>{dd, h}));
  EXPECT_EQ(q[3 * h + 5], w.layers[0].linear.q[5 * dd + 3]);
  // k_conv1d [D, 1, K] is the second D-row block of our [3D x K] conv.
  auto [ks, kc] = tensor("model.layers.0.attention.k_conv1d.weight");
  EXPECT_EQ(ks, (std::vector<int64_t>{dd, 1, k}));
  EXPECT_EQ(kc[2 * k + 1], w.layers[0].linear.conv[(dd + 2) * k + 1]);
  EXPECT_EQ(tensor("model.layers.0.attention.g_proj.weight").first, (std::vector<int64_t>{dd, h}));
  EXPECT_EQ(tensor("model.layers.0.attention.A_log").first, (std::vector<int64_t>{heads}));
  EXPECT_EQ(tensor("model.layers.0.attention.dt_bias").first, (std::vector<int64_t>{dd}));
  // MLA (layer 3): g_proj is the head-wise gate [heads, H]; dense is o_proj.
  auto [gs, g] = tensor("model.layers.3.attention.g_proj.weight");
  EXPECT_EQ(gs, (std::vector<int64_t>{heads, h}));
  EXPECT_EQ(g[1 * h + 7], w.layers[3].mla.gate[7 * heads + 1]);
  EXPECT_EQ(tensor("model.layers.3.attention.dense.weight").first,
            (std::vector<int64_t>{h, heads * c.v_head_dim}));
  // Dense MLP (layer 0): gate_proj is columns [0, I) of gate_up, up_proj columns [I, 2I).
  auto [gps, gp] = tensor("model.layers.0.mlp.gate_proj.weight");
  auto [ups, up] = tensor("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(gps, (std::vector<int64_t>{inter, h}));
  EXPECT_EQ(gp[4 * h + 9], w.layers[0].dense.gate_up[9 * 2 * inter + 4]);
  EXPECT_EQ(up[4 * h + 9], w.layers[0].dense.gate_up[9 * 2 * inter + inter + 4]);
  EXPECT_EQ(tensor("model.layers.0.mlp.down_proj.weight").first, (std::vector<int64_t>{h, inter}));
  // Router and embeddings.
  EXPECT_EQ(tensor("model.layers.1.mlp.gate.weight").first, (std::vector<int64_t>{c.experts, h}));
  EXPECT_EQ(tensor("model.layers.1.mlp.gate.expert_bias").first, (std::vector<int64_t>{c.experts}));
  EXPECT_EQ(tensor("model.word_embeddings.weight").second, w.embed);
  auto [ls, lm] = tensor("lm_head.weight");
  EXPECT_EQ(ls, (std::vector<int64_t>{c.vocab, h}));
  EXPECT_EQ(lm[10 * h + 2], w.lm_head[2 * c.vocab + 10]);
  const json cfg = json::parse(ReadFile(tmp / "ck/config.json"));
  EXPECT_EQ(cfg["model_type"], "bailing_hybrid");
  EXPECT_EQ(cfg["torch_dtype"], "float32");
}

TEST(CheckpointTest, FoundationArchUsesMhaProjections) {
  TempDir tmp;
  ModelConfig c = PresetConfig("tiny").value();
  c.hidden = 32;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.expert_inter = 16;
  c.shared_inter = 16;
  const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
  ASSERT_THAT(WriteCheckpoint(c, w, tmp / "ck", DType::kF32), IsOk());
  auto f = SafetensorsFile::Open(tmp / "ck/model-00001-of-00001.safetensors").value();
  const TensorView* k = f->Find("model.layers.2.attention.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{16, 32}));
  std::vector<float> kv(k->elements());
  ToFloat(*k, kv.data());
  // k columns follow the 32 q columns of wqkv [H x (q|k|v)].
  EXPECT_EQ(kv[3 * 32 + 5], w.layers[2].wqkv[5 * 64 + 32 + 3]);
  EXPECT_NE(f->Find("model.layers.0.mlp.shared_experts.down_proj.weight"), nullptr);
  std::unique_ptr<Checkpoint> ck = OpenOk(tmp / "ck");
  ASSERT_NE(ck, nullptr);
  ExpectSameWeights(ck->Load(AllExperts(c)).value(), w);
}

TEST(CheckpointTest, MtpLayersAreWrittenAndSkipped) {
  TempDir tmp;
  ModelConfig c = PresetConfig("tiny-hybrid").value();
  c.mtp_layers = 1;
  const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
  ASSERT_THAT(WriteCheckpoint(c, w, tmp / "ck", DType::kF32), IsOk());
  std::unique_ptr<Checkpoint> ck = OpenOk(tmp / "ck");
  ASSERT_NE(ck, nullptr);
  EXPECT_EQ(ck->config().mtp_layers, 1);
  for (const char* key :
       {"model.layers.8.eh_proj.weight", "model.layers.8.enorm.weight",
        "model.layers.8.hnorm.weight", "model.layers.8.final_layernorm.weight",
        "model.layers.8.input_layernorm.weight", "model.layers.8.post_attention_layernorm.weight",
        "model.layers.8.attention.dense.weight", "model.layers.8.mlp.experts.15.down_proj.weight",
        "model.layers.8.mlp.gate.weight"}) {
    EXPECT_THAT(ck->skipped(), Contains(std::string(key)));
  }
  ExpectSameWeights(ck->Load(AllExperts(c)).value(), w);
}

TEST(CheckpointTest, SmallShardLimitGivesSeveralFilesAndAnIndex) {
  TempDir tmp;
  const ModelConfig c = MiniHybrid();
  const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
  const int64_t limit = 16 << 10;
  ASSERT_THAT(WriteCheckpoint(c, w, tmp / "ck", DType::kBF16, limit), IsOk());
  std::vector<std::string> shards;
  for (const auto& e : fs::directory_iterator(tmp / "ck")) {
    if (e.path().extension() == ".safetensors") shards.push_back(e.path().filename().string());
  }
  std::sort(shards.begin(), shards.end());
  ASSERT_GT(shards.size(), 3u);
  const std::string n = std::to_string(shards.size());
  EXPECT_EQ(shards.front(),
            "model-00001-of-" + std::string(5 - n.size(), '0') + n + ".safetensors");
  const json index = json::parse(ReadFile(tmp / "ck/model.safetensors.index.json"));
  uint64_t total = 0, listed = 0;
  for (const std::string& s : shards) {
    auto f = SafetensorsFile::Open(tmp / ("ck/" + s)).value();
    uint64_t bytes = 0;
    for (const auto& [name, t] : f->tensors()) {
      bytes += t.bytes;
      EXPECT_EQ(index["weight_map"][name], s) << name;
    }
    if (f->tensors().size() > 1) {
      EXPECT_LE(bytes, static_cast<uint64_t>(limit)) << s;
    }
    total += bytes;
    listed += f->tensors().size();
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"].size(), listed);
  std::unique_ptr<Checkpoint> ck = OpenOk(tmp / "ck");
  ASSERT_NE(ck, nullptr);
  EXPECT_THAT(ck->Load(AllExperts(c)), IsOk());
}

float RoundToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(CheckpointTest, Bf16LoadsTheFp32ValuesRoundedToBf16) {
  TempDir tmp;
  const ModelConfig c = MiniHybrid();
  const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
  ASSERT_THAT(WriteCheckpoint(c, w, tmp / "ck", DType::kBF16), IsOk());
  std::unique_ptr<Checkpoint> ck = OpenOk(tmp / "ck");
  ASSERT_NE(ck, nullptr);
  const ModelWeights got = ck->Load(AllExperts(c)).value();
  const std::vector<float>& a = w.layers[0].linear.q;
  const std::vector<float>& b = got.layers[0].linear.q;
  ASSERT_EQ(a.size(), b.size());
  size_t changed = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i], RoundToBf16(a[i])) << i;
    EXPECT_NEAR(b[i], a[i], std::abs(a[i]) / 256.0f) << i;  // 8 significant bits
    changed += b[i] != a[i];
  }
  EXPECT_GT(changed, a.size() / 2);  // bf16 really dropped bits
  for (size_t i = 0; i < w.embed.size(); i += 97) EXPECT_EQ(got.embed[i], RoundToBf16(w.embed[i]));
  const json cfg = json::parse(ReadFile(tmp / "ck/config.json"));
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
}

TEST(CheckpointTest, WriteRefusesAnExistingTargetAndIncompleteWeights) {
  TempDir tmp;
  const ModelConfig c = MiniHybrid();
  fs::create_directory(tmp / "ck");
  WriteFile(tmp / "ck/keep", "x");
  const ModelWeights w = BuildWeights(c, kSeed, AllExperts(c));
  EXPECT_THAT(WriteCheckpoint(c, w, tmp / "ck", DType::kF32),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("already exists")));
  EXPECT_EQ(ReadFile(tmp / "ck/keep"), "x");
  EXPECT_THAT(WriteCheckpoint(c, BuildWeights(c, kSeed, {0, 1}), tmp / "ck2", DType::kF32),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("every expert must be present")));
  EXPECT_THAT(WriteCheckpoint(c, w, tmp / "ck3", DType::kF16),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("F16")));
  // Nothing but the pre-existing directory: no partial or temporary checkpoints.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace sy::engine
