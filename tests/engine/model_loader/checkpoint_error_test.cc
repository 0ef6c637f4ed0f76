#include <filesystem>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/status_matchers.h"
#include "engine/model_loader/checkpoint.h"
#include "engine/model_loader/hf_config.h"
#include "tests/engine/model_loader/test_util.h"

// Damaged checkpoints: every way Checkpoint::Open refuses one, each naming
// what is wrong. The damage is done by rewriting a good checkpoint's shards.

namespace sy::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::AllExperts;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::kSeed;
using testing::MiniHybrid;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// Rewrites every shard of `dir` through `edit` (which may rename, reshape or
// drop tensors) and rebuilds the index from the files.
using Edit =
    std::function<bool(std::string& name, std::vector<int64_t>& shape, std::vector<float>& v)>;
void RewriteShards(const std::string& dir, const Edit& edit) {
  json weight_map = json::object();
  std::vector<fs::path> files;  // listed first: rewriting renames files into the directory
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  for (const fs::path& path : files) {
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::vector<float>> data;
    {
      auto f = SafetensorsFile::Open(path.string()).value();
      for (const auto& [name, t] : f->tensors()) {
        std::string n = name;
        std::vector<int64_t> s = t.shape;
        std::vector<float> v(t.elements());
        ToFloat(t, v.data());
        if (!edit(n, s, v)) continue;
        names.push_back(n);
        shapes.push_back(s);
        data.push_back(std::move(v));
      }
    }
    std::vector<TensorToWrite> tw;
    for (size_t i = 0; i < names.size(); ++i) {
      tw.push_back({names[i], shapes[i], data[i].data()});
      weight_map[names[i]] = path.filename().string();
    }
    ASSERT_THAT(WriteSafetensors(path.string(), tw, DType::kF32, {}), IsOk());
  }
  WriteFile(dir + "/model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
}

class CheckpointErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = MiniHybrid();
    config_.mtp_layers = 1;
    ASSERT_THAT(WriteCheckpoint(config_, BuildWeights(config_, kSeed, AllExperts(config_)), dir(),
                                DType::kF32, 64 << 10),
                IsOk());
  }
  std::string dir() const { return tmp_ / "ck"; }
  std::string ShardOf(const std::string& tensor) const {
    const json index = json::parse(ReadFile(dir() + "/model.safetensors.index.json"));
    return dir() + "/" + index["weight_map"][tensor].get<std::string>();
  }
  TempDir tmp_;
  ModelConfig config_;
};

TEST_F(CheckpointErrorTest, ExtraKeyIsFailedPreconditionNamingIt) {
  RewriteShards(dir(), [](std::string& name, std::vector<int64_t>&, std::vector<float>&) {
    if (name == "model.layers.2.attention.f_proj.weight")
      name = "model.layers.2.attention.f_a_proj.weight";
    if (name == "model.layers.4.enorm.weight")
      name = "model.layers.4.surprise.weight";  // MTP layer, not on the list
    return true;
  });
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("model.layers.2.attention.f_a_proj.weight"),
                             HasSubstr("model.layers.4.surprise.weight"))));
}

TEST_F(CheckpointErrorTest, KeyBeyondTheMtpLayersIsUnmapped) {
  RewriteShards(dir(), [](std::string& name, std::vector<int64_t>&, std::vector<float>&) {
    if (name == "model.layers.4.enorm.weight") name = "model.layers.5.enorm.weight";
    return true;
  });
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("model.layers.5.enorm.weight")));
}

TEST_F(CheckpointErrorTest, MissingKeyIsNotFoundNamingIt) {
  RewriteShards(dir(), [](std::string& name, std::vector<int64_t>&, std::vector<float>&) {
    return name != "model.layers.1.mlp.experts.3.up_proj.weight";
  });
  EXPECT_THAT(
      Checkpoint::Open(dir()),
      StatusIs(StatusCode::kNotFound, HasSubstr("model.layers.1.mlp.experts.3.up_proj.weight")));
}

TEST_F(CheckpointErrorTest, WrongShapeNamesFileTensorExpectedAndFound) {
  // The KDA-shaped g_proj in the MLA layer: the loader must know the layer type.
  RewriteShards(dir(), [](std::string& name, std::vector<int64_t>& shape, std::vector<float>& v) {
    if (name == "model.layers.3.attention.g_proj.weight") {
      shape = {16, 32};
      v.assign(16 * 32, 0.5f);
    }
    return true;
  });
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("file " + dir() + "/model-"),
                             HasSubstr("tensor 'model.layers.3.attention.g_proj.weight'"),
                             HasSubstr("expected shape [2, 32], found [16, 32]"))));
}

TEST_F(CheckpointErrorTest, TruncatedShardIsDataLossNamingFileAndTensor) {
  const std::string shard = ShardOf("lm_head.weight");
  fs::resize_file(shard, fs::file_size(shard) - 100);
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kDataLoss,
                       AllOf(HasSubstr(shard + " is truncated"), HasSubstr("tensor '"))));
}

TEST_F(CheckpointErrorTest, CorruptHeaderIsDataLoss) {
  const std::string shard = ShardOf("lm_head.weight");
  std::string bytes = ReadFile(shard);
  bytes[8] = '[';  // the header's opening brace
  WriteFile(shard, bytes);
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr(shard), HasSubstr("JSON"))));
  bytes[5] = 1;  // header length far beyond the file
  WriteFile(shard, bytes);
  EXPECT_THAT(
      Checkpoint::Open(dir()),
      StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr(shard), HasSubstr("exceeds the file"))));
}

TEST_F(CheckpointErrorTest, IndexPointingAtTheWrongFileIsDataLoss) {
  json index = json::parse(ReadFile(dir() + "/model.safetensors.index.json"));
  const std::string right = index["weight_map"]["lm_head.weight"];
  const std::string wrong = index["weight_map"]["model.word_embeddings.weight"];
  ASSERT_NE(right, wrong);
  index["weight_map"]["lm_head.weight"] = wrong;
  WriteFile(dir() + "/model.safetensors.index.json", index.dump());
  EXPECT_THAT(
      Checkpoint::Open(dir()),
      StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr("'lm_head.weight'"), HasSubstr(wrong))));
  index["weight_map"]["lm_head.weight"] = "../elsewhere.safetensors";
  WriteFile(dir() + "/model.safetensors.index.json", index.dump());
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a file name in the checkpoint")));
}

TEST_F(CheckpointErrorTest, ConfigErrorsNameTheField) {
  json cfg = json::parse(ReadFile(dir() + "/config.json"));
  cfg.erase("kv_lora_rank");
  WriteFile(dir() + "/config.json", cfg.dump());
  EXPECT_THAT(Checkpoint::Open(dir()),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("config.json"), HasSubstr("'kv_lora_rank'"))));
  fs::remove(dir() + "/config.json");
  EXPECT_THAT(Checkpoint::Open(dir()), StatusIs(StatusCode::kNotFound, HasSubstr("config.json")));
}

TEST(CheckpointOpenTest, MissingDirectoryOrShardsIsNotFound) {
  TempDir tmp;
  EXPECT_THAT(Checkpoint::Open(tmp / "none"), StatusIs(StatusCode::kNotFound, HasSubstr("none")));
  fs::create_directory(tmp / "empty");
  WriteFile(tmp / "empty/config.json", ToHfConfig(MiniHybrid()).dump());
  EXPECT_THAT(Checkpoint::Open(tmp / "empty"),
              StatusIs(StatusCode::kNotFound, HasSubstr("no *.safetensors")));
}

}  // namespace
}  // namespace sy::engine
