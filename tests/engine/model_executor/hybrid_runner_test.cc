// The hybrid model (MLA + KDA/GLA, dense layer 0, sigmoid grouped router)
// through the ModelRunner: prefill/decode consistency, device-count
// independence, and checkpoint round trips. The per-layer math is checked
// against plain references in tests/engine/attention; these tests check
// that the pieces are assembled so the state each layer keeps is right.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/status_matchers.h"
#include "engine/model_executor/model_runner.h"
#include "engine/model_loader/checkpoint.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

constexpr int kPageSize = 16;

ModelConfig Preset(const std::string& name) {
  ModelConfig c = PresetConfig(name).value();
  c.max_seq = 256;  // small pools keep the test fast
  return c;
}

std::unique_ptr<ModelRunner> MakeRunner(const ModelConfig& c, int devices,
                                        const Checkpoint* ckpt = nullptr) {
  auto r = ModelRunner::Create(c, {.devices = devices,
                                   .seed = 3,
                                   .checkpoint = ckpt,
                                   .kv_pages_per_device = 64,
                                   .page_size = kPageSize,
                                   .state_slots_per_device = 8});
  EXPECT_THAT(r, IsOk());
  return std::move(r).value();
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 101 + 11) % 256);
  return t;
}

// A request holding pages for max_seq and a state slot on `device`.
SeqInput MakeSeq(ModelRunner& runner, int64_t id, int device) {
  SeqInput s;
  s.request_id = id;
  s.device = device;
  EXPECT_THAT(runner.kv_pool(device).Allocate(KvPool::PagesFor(runner.config().max_seq, kPageSize),
                                              &s.pages),
              IsOk());
  Result<int> slot = runner.state_pool(device).Allocate();
  EXPECT_THAT(slot, IsOk());
  s.state_slot = slot.ok() ? *slot : -1;
  return s;
}

std::vector<float> RunSeq(ModelRunner& runner, SeqInput s, std::vector<int32_t> tokens,
                          int start_pos) {
  s.tokens = std::move(tokens);
  s.start_pos = start_pos;
  auto out = runner.Logits(BatchInput{.step = start_pos, .seqs = {s}});
  EXPECT_THAT(out, IsOk());
  return out.ok() ? (*out)[0] : std::vector<float>();
}

// max |a - b| relative to the logit scale.
float RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float scale = 1, worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst / scale;
}

class HybridRunnerTest : public ::testing::TestWithParam<std::string> {};

// Logits after 100 tokens: one long prefill (two 64-token chunks of the
// chunk-wise linear attention) equals prefill 70 then 30 single-token decodes.
TEST_P(HybridRunnerTest, PrefillThenDecodeEqualsOneLongPrefill) {
  const ModelConfig c = Preset(GetParam());
  auto runner = MakeRunner(c, 1);
  const std::vector<int32_t> p = Prompt(100, 1);
  SeqInput a = MakeSeq(*runner, 1, 0);
  const std::vector<float> whole = RunSeq(*runner, a, p, 0);

  SeqInput b = MakeSeq(*runner, 2, 0);
  std::vector<float> last = RunSeq(*runner, b, {p.begin(), p.begin() + 70}, 0);
  for (int i = 70; i < 100; ++i) last = RunSeq(*runner, b, {p[i]}, i);
  // fp32 with different summation orders (chunk-wise vs recurrent): 1e-4 of
  // the logit scale is far below any change a wrong state would make.
  EXPECT_LT(RelDiff(last, whole), 1e-4f);
}

// Uneven chunks continue from the same slot and pages.
TEST_P(HybridRunnerTest, ChunkedPrefillEqualsOneLongPrefill) {
  const ModelConfig c = Preset(GetParam());
  auto runner = MakeRunner(c, 1);
  const std::vector<int32_t> p = Prompt(150, 2);
  SeqInput a = MakeSeq(*runner, 1, 0);
  const std::vector<float> whole = RunSeq(*runner, a, p, 0);
  SeqInput b = MakeSeq(*runner, 2, 0);
  RunSeq(*runner, b, {p.begin(), p.begin() + 13}, 0);
  RunSeq(*runner, b, {p.begin() + 13, p.begin() + 90}, 13);
  const std::vector<float> chunked = RunSeq(*runner, b, {p.begin() + 90, p.end()}, 90);
  EXPECT_LT(RelDiff(chunked, whole), 1e-4f);
}

// The same request on 1 device and on device 2 of 4, in a batch with other
// requests on other devices: experts live elsewhere, the logits do not move.
TEST_P(HybridRunnerTest, SameLogitsOnOneAndFourDevices) {
  const ModelConfig c = Preset(GetParam());
  auto one = MakeRunner(c, 1);
  auto four = MakeRunner(c, 4);
  const std::vector<int32_t> p = Prompt(40, 3);
  SeqInput s1 = MakeSeq(*one, 1, 0);
  s1.tokens = p;
  auto l1 = one->Logits(BatchInput{.seqs = {s1}});
  ASSERT_THAT(l1, IsOk());

  BatchInput batch;
  for (int d = 0; d < 4; ++d) {
    SeqInput s = MakeSeq(*four, 10 + d, d);
    s.tokens = d == 2 ? p : Prompt(20 + d, 7 + d);
    batch.seqs.push_back(s);
  }
  auto l4 = four->Logits(batch);
  ASSERT_THAT(l4, IsOk());
  EXPECT_LT(RelDiff((*l4)[2], (*l1)[0]), 1e-5f);
}

// A slot left dirty by a finished request does not leak into the next one.
TEST_P(HybridRunnerTest, ReusedSlotStartsClean) {
  const ModelConfig c = Preset(GetParam());
  auto runner = MakeRunner(c, 1);
  SeqInput first = MakeSeq(*runner, 1, 0);
  const std::vector<float> fresh = RunSeq(*runner, first, Prompt(30, 4), 0);
  SeqInput dirty = MakeSeq(*runner, 2, 0);
  RunSeq(*runner, dirty, Prompt(50, 5), 0);
  runner->state_pool(0).Free(dirty.state_slot);
  SeqInput again = MakeSeq(*runner, 3, 0);
  ASSERT_EQ(again.state_slot, dirty.state_slot);  // LIFO: the dirty slot comes back
  EXPECT_EQ(RunSeq(*runner, again, Prompt(30, 4), 0), fresh);
}

// Weights written by WriteCheckpoint and loaded back give bit-identical logits.
TEST_P(HybridRunnerTest, CheckpointServesTheSameLogitsAsThePreset) {
  const ModelConfig c = Preset(GetParam());
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("hybrid_ckpt_" + GetParam());
  std::filesystem::remove_all(dir);
  std::vector<int> all(c.experts);
  for (int e = 0; e < c.experts; ++e) all[e] = e;
  ASSERT_THAT(WriteCheckpoint(c, BuildWeights(c, 3, all), dir.string(), DType::kF32), IsOk());
  auto ckpt = Checkpoint::Open(dir.string());
  ASSERT_THAT(ckpt, IsOk());
  ModelConfig loaded = (*ckpt)->config();
  loaded.max_seq = c.max_seq;
  loaded.name = c.name;
  auto from_ckpt = MakeRunner(loaded, 2, ckpt->get());
  auto from_preset = MakeRunner(c, 2);
  const std::vector<int32_t> p = Prompt(33, 6);
  SeqInput a = MakeSeq(*from_ckpt, 1, 1);
  SeqInput b = MakeSeq(*from_preset, 1, 1);
  EXPECT_EQ(RunSeq(*from_ckpt, a, p, 0), RunSeq(*from_preset, b, p, 0));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridRunnerTest, ::testing::Values("tiny-hybrid", "tiny-gla"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(HybridRunnerValidationTest, RequiresAStateSlot) {
  auto runner = MakeRunner(Preset("tiny-hybrid"), 1);
  SeqInput s = MakeSeq(*runner, 1, 0);
  s.state_slot = -1;
  s.tokens = Prompt(4, 1);
  EXPECT_THAT(runner->Step(BatchInput{.seqs = {s}}, TraceLevel::kOff),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("state slot -1")));
}

TEST(HybridRunnerValidationTest, RefusesAModelThatCannotFitInMemory) {
  auto r = ModelRunner::Create(PresetConfig("ling3-tiny").value(), {.devices = 4});
  // 7B parameters in fp32 plus per-device copies: more than any CI machine.
  EXPECT_THAT(r, StatusIs(StatusCode::kResourceExhausted, HasSubstr("ling3-tiny")));
}

// Every layer kind shows up in the trace with its own spans.
TEST(HybridRunnerTraceTest, SpansNameEachLayerKind) {
  auto runner = MakeRunner(Preset("tiny-hybrid"), 2);
  SeqInput s = MakeSeq(*runner, 1, 0);
  s.tokens = Prompt(20, 1);
  auto out = runner->Step(BatchInput{.seqs = {s}}, TraceLevel::kFull);
  ASSERT_THAT(out, IsOk());
  std::set<std::string> names;
  for (const auto& sp : out->spans) names.insert(sp.name);
  for (const char* n : {"dense_mlp", "mla_attention", "kda_chunk", "dispatch", "combine"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

}  // namespace
}  // namespace sy::engine
