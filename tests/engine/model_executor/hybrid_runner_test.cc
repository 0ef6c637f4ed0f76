// The hybrid model (MLA + KDA/GLA, dense layer 0, sigmoid grouped router)
// through the ModelRunner: prefill/decode consistency, device-count
// independence, and checkpoint round trips. The per-layer math is checked
// against plain references in tests/engine/attention; these tests check
// that the pieces are assembled so the state each layer keeps is right,
// including prefix-cache checkpoints (copy into a working slot, snapshot
// after checkpoint_len tokens) and their validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

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

// ---------------------------------------------------------------- prefix cache

// Every float of `slot` on `device` (all linear layers, recurrent then conv).
std::vector<float> SlotContents(ModelRunner& runner, int device, int slot) {
  const StatePool& pool = runner.state_pool(device);
  std::vector<float> v;
  for (int l = 0; l < pool.options().layers; ++l) {
    const float* s = pool.State(slot, l);
    v.insert(v.end(), s, s + pool.options().state_floats);
    if (pool.options().conv_floats > 0) {
      const float* cv = pool.Conv(slot, l);
      v.insert(v.end(), cv, cv + pool.options().conv_floats);
    }
  }
  return v;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = d;  // NaN fails
  }
  return worst;
}

float MaxAbs(const std::vector<float>& a) {
  float m = 0;
  for (float x : a) m = std::max(m, std::fabs(x));
  return m;
}

// (preset, devices); the requests live on the last device.
class PrefixHitTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    runner_ = MakeRunner(Preset(std::get<0>(GetParam())), std::get<1>(GetParam()));
    dev_ = std::get<1>(GetParam()) - 1;
  }
  int NewSlot() { return runner_->state_pool(dev_).Allocate().value(); }

  std::unique_ptr<ModelRunner> runner_;
  int dev_ = 0;
};

// Request A prefills 48 tokens and checkpoints the state after 32 into slot
// C. Request B shares A's first two pages (32 positions), copies C into its
// own (stale) working slot and prefills only tokens 32..47: its logits equal
// A's within 1e-5 of the logit scale (the same math, different GEMM shapes),
// and C is bit-for-bit unchanged by B's step.
TEST_P(PrefixHitTest, CopiedCheckpointServesTheSameLogits) {
  ModelRunner& r = *runner_;
  const std::vector<int32_t> p = Prompt(48, 8);
  SeqInput a = MakeSeq(r, 1, dev_);
  const int ckpt = NewSlot();
  a.checkpoint_slot = ckpt;
  a.checkpoint_len = 32;
  const std::vector<float> la = RunSeq(r, a, p, 0);
  const std::vector<float> c_after_a = SlotContents(r, dev_, ckpt);

  // Taking the checkpoint does not change A's own logits.
  SeqInput plain = MakeSeq(r, 2, dev_);
  EXPECT_LT(RelDiff(la, RunSeq(r, plain, p, 0)), 1e-5f);
  // C holds the state after exactly 32 tokens, in every linear layer.
  SeqInput first = MakeSeq(r, 3, dev_);
  RunSeq(r, first, {p.begin(), p.begin() + 32}, 0);
  const std::vector<float> want_c = SlotContents(r, dev_, first.state_slot);
  EXPECT_LE(MaxAbsDiff(c_after_a, want_c), 1e-4f * MaxAbs(want_c));
  for (const SeqInput* done : {&plain, &first}) {  // 64 pages per device: give them back
    r.kv_pool(dev_).Free(done->pages);
    r.state_pool(dev_).Free(done->state_slot);
  }

  SeqInput b;
  b.request_id = 4;
  b.device = dev_;
  ASSERT_THAT(r.kv_pool(dev_).Allocate(1, &b.pages), IsOk());
  b.pages.insert(b.pages.begin(), a.pages.begin(), a.pages.begin() + 2);
  SeqInput previous = MakeSeq(r, 5, dev_);  // a finished request's stale state
  RunSeq(r, previous, Prompt(20, 9), 0);
  b.state_slot = previous.state_slot;
  b.state_copy_from = ckpt;
  const std::vector<float> lb = RunSeq(r, b, {p.begin() + 32, p.end()}, 32);
  EXPECT_LT(RelDiff(lb, la), 1e-5f);
  EXPECT_EQ(SlotContents(r, dev_, ckpt), c_after_a);

  // Control: the same step without the copy continues from B's own (now
  // wrong) state and lands far away, so the comparison above can fail.
  b.state_copy_from = -1;
  EXPECT_GT(RelDiff(RunSeq(r, b, {p.begin() + 32, p.end()}, 32), la), 1e-3f);
}

// A decode step with checkpoint_len = start_pos + 1 snapshots the state after
// the decoded token; a request continuing from a copy of it (sharing the
// original's pages) computes exactly what the original computes, step after
// step: the copy is bit-exact and the math identical, so logits are equal.
TEST_P(PrefixHitTest, DecodeCheckpointContinuesLikeTheOriginal) {
  ModelRunner& r = *runner_;
  const std::vector<int32_t> p = Prompt(44, 10);
  SeqInput a = MakeSeq(r, 1, dev_);
  RunSeq(r, a, {p.begin(), p.begin() + 40}, 0);
  const int ckpt = NewSlot();
  a.checkpoint_slot = ckpt;
  a.checkpoint_len = 41;
  RunSeq(r, a, {p[40]}, 40);
  EXPECT_EQ(SlotContents(r, dev_, ckpt), SlotContents(r, dev_, a.state_slot));
  a.checkpoint_slot = -1;
  a.checkpoint_len = 0;

  SeqInput b;
  b.request_id = 2;
  b.device = dev_;
  b.pages = a.pages;
  SeqInput previous = MakeSeq(r, 3, dev_);  // a finished request's stale state
  RunSeq(r, previous, Prompt(30, 11), 0);
  b.state_slot = previous.state_slot;
  b.state_copy_from = ckpt;
  for (int pos = 41; pos < 44; ++pos) {
    // B first: it rewrites position pos of the shared pages with the values A
    // writes next, so neither sees anything the other would not.
    const std::vector<float> lb = RunSeq(r, b, {p[pos]}, pos);
    b.state_copy_from = -1;  // continues in its own slot from now on
    EXPECT_EQ(lb, RunSeq(r, a, {p[pos]}, pos)) << "position " << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(PresetsAndDevices, PrefixHitTest,
                         ::testing::Combine(::testing::Values("tiny-hybrid", "tiny-gla"),
                                            ::testing::Values(1, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n + "_" + std::to_string(std::get<1>(info.param)) + "dev";
                         });

// Each malformed prefix-cache field is refused with its own message, and
// nothing is written: a valid seq with a copy and a checkpoint rides along in
// every refused batch, and every slot keeps its contents.
TEST(HybridRunnerValidationTest, RejectsBadPrefixCacheFields) {
  auto runner = MakeRunner(Preset("tiny-hybrid"), 1);
  ModelRunner& r = *runner;
  SeqInput good = MakeSeq(r, 1, 0), bad = MakeSeq(r, 2, 0);
  RunSeq(r, good, Prompt(16, 1), 0);
  RunSeq(r, bad, Prompt(16, 2), 0);
  const int src = r.state_pool(0).Allocate().value();  // a checkpoint to copy from
  const int ck = r.state_pool(0).Allocate().value();   // good's checkpoint destination
  const int free_slot = r.state_pool(0).Allocate().value();
  r.state_pool(0).Copy(good.state_slot, src);
  good.state_copy_from = src;
  good.checkpoint_slot = ck;
  good.checkpoint_len = 18;
  good.tokens = Prompt(4, 3);
  good.start_pos = 16;
  ASSERT_THAT(r.Logits(BatchInput{.seqs = {good}}), IsOk());  // valid alone
  bad.tokens = Prompt(4, 4);
  bad.start_pos = 16;
  std::vector<std::vector<float>> before;
  for (int s = 0; s < 8; ++s) before.push_back(SlotContents(r, 0, s));

  const int own = bad.state_slot;
  const std::string o = std::to_string(own);
  struct Case {
    int copy_from, checkpoint_slot, checkpoint_len, start_pos;
    std::string message;
  };
  const std::vector<Case> cases = {
      {8, -1, 0, 16, "state_copy_from 8 is outside [0, 8)"},
      {-2, -1, 0, 16, "state_copy_from -2 is outside [0, 8)"},
      {own, -1, 0, 16, "state_copy_from " + o + " equals its state_slot"},
      {free_slot, free_slot, 17, 16, "state_copy_from and checkpoint_slot are both slot"},
      {src, -1, 0, 0, "state_copy_from " + std::to_string(src) + " needs start_pos > 0"},
      {-1, 8, 17, 16, "checkpoint_slot 8 is outside [0, 8)"},
      {-1, own, 17, 16, "checkpoint_slot " + o + " equals its state_slot"},
      {-1, free_slot, 16, 16, "checkpoint_len 16 is outside (start_pos 16, 20]"},
      {-1, free_slot, 21, 16, "checkpoint_len 21 is outside (start_pos 16, 20]"},
      {-1, -1, 5, 16, "checkpoint_len 5 is set without a checkpoint_slot"},
      {-1, ck, 17, 16, "state slot " + std::to_string(ck) + " on device 0 is written by both"},
      {-1, good.state_slot, 17, 16, "is written by both"},
      {ck, -1, 0, 16, "is written in the same step by seq 0 (request 1)"},
  };
  for (const Case& c : cases) {
    SeqInput s = bad;
    s.state_copy_from = c.copy_from;
    s.checkpoint_slot = c.checkpoint_slot;
    s.checkpoint_len = c.checkpoint_len;
    s.start_pos = c.start_pos;
    EXPECT_THAT(r.Step(BatchInput{.seqs = {good, s}}, TraceLevel::kOff),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.message;
    EXPECT_THAT(r.Logits(BatchInput{.seqs = {good, s}}), StatusIs(StatusCode::kInvalidArgument))
        << c.message;
  }
  for (int s = 0; s < 8; ++s) EXPECT_EQ(SlotContents(r, 0, s), before[s]) << "slot " << s;
  // Two seqs may copy the same checkpoint.
  SeqInput s = bad;
  s.state_copy_from = src;
  EXPECT_THAT(r.Step(BatchInput{.seqs = {good, s}}, TraceLevel::kOff), IsOk());
}

TEST(HybridRunnerValidationTest, PrefixCacheFieldsNeedLinearLayers) {
  auto runner = MakeRunner(Preset("tiny"), 1);
  SeqInput s;
  s.request_id = 1;
  s.tokens = Prompt(4, 1);
  s.start_pos = 16;
  ASSERT_THAT(runner->kv_pool(0).Allocate(2, &s.pages), IsOk());
  ASSERT_THAT(runner->Logits(BatchInput{.seqs = {s}}), IsOk());
  SeqInput copy = s, ckpt = s;
  copy.state_copy_from = 0;
  ckpt.checkpoint_slot = 0;
  ckpt.checkpoint_len = 18;
  EXPECT_THAT(
      runner->Step(BatchInput{.seqs = {copy}}, TraceLevel::kOff),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("state_copy_from 0 is set but the model has no linear-attention")));
  EXPECT_THAT(
      runner->Step(BatchInput{.seqs = {ckpt}}, TraceLevel::kOff),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("checkpoint_slot 0 is set but the model has no linear-attention")));
}

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
