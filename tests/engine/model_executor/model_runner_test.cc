#include "engine/model_executor/model_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "base/status_matchers.h"
#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ModelConfig TestConfig() {
  ModelConfig c;
  c.name = "test";
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.experts = 8;
  c.top_k = 2;
  c.expert_inter = 32;
  c.shared_inter = 48;
  c.max_seq = 96;
  return c;
}

std::unique_ptr<ModelRunner> MakeRunner(int devices, uint64_t seed = 1,
                                        const ModelConfig& c = TestConfig()) {
  auto r = ModelRunner::Create(
      c, {.devices = devices, .seed = seed, .kv_pages_per_device = 256, .page_size = 4});
  EXPECT_THAT(r, IsOk());
  return std::move(r).value();
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 101 + 11) % 260);
  return t;
}

// A request's KV pages on its device, enough for the test config's max_seq.
SeqInput MakeSeq(ModelRunner& runner, int64_t id, int device, std::vector<int32_t> tokens) {
  SeqInput s;
  s.request_id = id;
  s.device = device;
  s.tokens = std::move(tokens);
  EXPECT_THAT(
      runner.kv_pool(device).Allocate(KvPool::PagesFor(runner.config().max_seq, 4), &s.pages),
      IsOk());
  return s;
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// max |a - b| <= tol * max(1, max|b|): tolerance relative to the logit scale.
void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  const float bound = tol * std::max(1.0f, MaxAbs(b));
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LE(worst, bound);
}

int Argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(ModelRunnerTest, PrefillLogitsMatchReferenceForward) {
  auto runner = MakeRunner(1);
  const ModelWeights full = ref::FullWeights(TestConfig(), 1);
  BatchInput b;
  b.seqs.push_back(MakeSeq(*runner, 1, 0, Prompt(11, 1)));
  b.seqs.push_back(MakeSeq(*runner, 2, 0, Prompt(3, 2)));
  auto logits = runner->Logits(b);
  ASSERT_THAT(logits, IsOk());
  ASSERT_EQ(logits->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto want = ref::Forward(TestConfig(), full, b.seqs[i].tokens).back();
    ExpectClose((*logits)[i], want, 1e-4f);
    EXPECT_GT(MaxAbs(want), 0.1f);  // the model produces real, non-degenerate logits
  }
}

TEST(ModelRunnerTest, ChunkedPrefillThenDecodeEqualsFullForward) {
  auto runner = MakeRunner(1);
  const ModelConfig c = TestConfig();
  const ModelWeights full = ref::FullWeights(c, 1);
  std::vector<int32_t> all = Prompt(9, 3);
  SeqInput seq = MakeSeq(*runner, 7, 0, {all.begin(), all.begin() + 5});
  // Chunk 1 (no sample), chunk 2, then decode 6 greedy tokens.
  seq.sample = false;
  ASSERT_THAT(runner->Step({.step = 0, .seqs = {seq}}, TraceLevel::kOff), IsOk());
  seq.start_pos = 5;
  seq.tokens.assign(all.begin() + 5, all.end());
  seq.sample = true;
  for (int step = 0; step < 6; ++step) {
    auto logits = runner->Logits({.step = 1, .seqs = {seq}});
    ASSERT_THAT(logits, IsOk());
    const auto want = ref::Forward(c, full, all).back();
    ExpectClose((*logits)[0], want, 1e-4f);
    const int next = Argmax(want);
    EXPECT_EQ(Argmax((*logits)[0]), next) << "step " << step;
    seq.start_pos = static_cast<int>(all.size());
    seq.tokens = {next};
    all.push_back(next);
  }
}

TEST(ModelRunnerTest, StepGreedyTokensFollowLogits) {
  auto runner = MakeRunner(2);
  BatchInput b;
  b.seqs.push_back(MakeSeq(*runner, 1, 1, Prompt(6, 4)));
  auto logits = runner->Logits(b);
  ASSERT_THAT(logits, IsOk());
  // Same positions again (overwrites the same KV slots with the same values).
  auto out = runner->Step(b, TraceLevel::kOff);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->outputs.size(), 1u);
  EXPECT_EQ(out->outputs[0].request_id, 1);
  EXPECT_EQ(out->outputs[0].next_token, Argmax((*logits)[0]));
}

// Runs prefill + `decode` greedy steps for requests spread over devices and
// returns every step's logits per request.
std::vector<std::vector<std::vector<float>>> Generate(ModelRunner& runner, int decode,
                                                      std::vector<std::vector<int32_t>>* tokens) {
  const int p = runner.devices();
  BatchInput b;
  for (int i = 0; i < 6; ++i) {
    // Devices 0..p-2 only when p > 1: the last device stays idle.
    const int dev = p == 1 ? 0 : i % (p - 1);
    b.seqs.push_back(MakeSeq(runner, 100 + i, dev, Prompt(3 + 2 * i, i)));
  }
  std::vector<std::vector<std::vector<float>>> per_step;
  tokens->assign(b.seqs.size(), {});
  for (int step = 0; step <= decode; ++step) {
    auto logits = runner.Logits(b);
    EXPECT_THAT(logits, IsOk());
    per_step.push_back(*logits);
    for (size_t i = 0; i < b.seqs.size(); ++i) {
      SeqInput& s = b.seqs[i];
      const int next = Argmax((*logits)[i]);
      (*tokens)[i].push_back(next);
      s.start_pos += static_cast<int>(s.tokens.size());
      s.tokens = {next};
    }
  }
  return per_step;
}

// Greedy tokens identical and logits within 1e-5 of a single device, over
// `steps` decode steps.
void ExpectMatchesOneDevice(int devices, int steps) {
  auto one = MakeRunner(1);
  auto many = MakeRunner(devices);
  std::vector<std::vector<int32_t>> t1, tn;
  const auto l1 = Generate(*one, steps, &t1);
  const auto ln = Generate(*many, steps, &tn);
  EXPECT_EQ(t1, tn);
  for (size_t s = 0; s < l1.size(); ++s) {
    for (size_t i = 0; i < l1[s].size(); ++i) ExpectClose(ln[s][i], l1[s][i], 1e-5f);
  }
}

TEST(ModelRunnerTest, FourDevicesMatchOneDevice) { ExpectMatchesOneDevice(4, 5); }

TEST(ModelRunnerTest, ThreeDevicesUnevenExpertSplitMatchOneDevice) { ExpectMatchesOneDevice(3, 2); }

TEST(ModelRunnerTest, StepReportsCountsSpansAndCommBytes) {
  const ModelConfig c = TestConfig();
  auto runner = MakeRunner(4);
  EXPECT_EQ(runner->expert_device(), (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  BatchInput b;
  b.seqs.push_back(MakeSeq(*runner, 1, 0, Prompt(5, 1)));
  b.seqs.push_back(MakeSeq(*runner, 2, 2, Prompt(1, 2)));
  b.seqs.back().sample = false;
  auto out = runner->Step(b, TraceLevel::kFull);
  ASSERT_THAT(out, IsOk());
  EXPECT_GE(out->outputs[0].next_token, 0);
  EXPECT_EQ(out->outputs[1].next_token, -1);  // sample == false
  ASSERT_EQ(out->expert_counts.size(), static_cast<size_t>(c.layers));
  for (const auto& layer : out->expert_counts) {
    ASSERT_EQ(layer.size(), static_cast<size_t>(c.experts));
    int64_t sum = 0;
    for (int64_t n : layer) sum += n;
    EXPECT_EQ(sum, 6 * c.top_k);
  }
  EXPECT_GT(out->comm_bytes, 0);
  std::set<std::string> names;
  std::set<int> devices;
  for (const auto& s : out->spans) {
    names.insert(s.name);
    devices.insert(s.device);
    if (s.name == "embed" || s.name == "lm_head" || s.name == "sample") {
      EXPECT_EQ(s.layer, -1);
    }
    if (s.name == "attention" || s.name == "expert_ffn") {
      EXPECT_GE(s.layer, 0);
      EXPECT_LT(s.layer, c.layers);
      EXPECT_GT(s.flops, 0);
    }
    if (s.name == "qkv_proj" && s.device == 0) {
      EXPECT_EQ(s.flops, 2LL * 5 * 64 * (64 + 2 * 32));
    }
    EXPECT_EQ(s.kind, (s.name == "dispatch" || s.name == "combine") ? "comm" : "compute");
  }
  for (const char* n :
       {"embed", "rmsnorm_attn", "qkv_proj", "rope", "attention", "o_proj", "rmsnorm_ffn", "router",
        "dispatch", "expert_ffn", "combine", "shared_expert", "final_norm", "lm_head", "sample"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(devices, (std::set<int>{0, 1, 2, 3}));  // idle devices still show their comm spans

  b.seqs[0].start_pos = 5;
  b.seqs[0].tokens = {out->outputs[0].next_token};
  b.seqs[1].start_pos = 1;
  auto off = runner->Step(b, TraceLevel::kOff);
  ASSERT_THAT(off, IsOk());
  EXPECT_TRUE(off->spans.empty());
  EXPECT_GT(off->comm_bytes, 0);
}

TEST(ModelRunnerTest, OneDeviceMovesNoBytes) {
  auto runner = MakeRunner(1);
  auto out = runner->Step({.step = 0, .seqs = {MakeSeq(*runner, 1, 0, Prompt(4, 1))}},
                          TraceLevel::kSummary);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->comm_bytes, 0);
  EXPECT_FALSE(out->spans.empty());
}

TEST(ModelRunnerTest, EmptyBatchIsANoOp) {
  auto runner = MakeRunner(2);
  auto out = runner->Step({}, TraceLevel::kFull);
  ASSERT_THAT(out, IsOk());
  EXPECT_TRUE(out->outputs.empty());
  EXPECT_EQ(out->comm_bytes, 0);
}

TEST(ModelRunnerTest, WeightsAreAFunctionOfTheSeed) {
  auto a = MakeRunner(2, 5), b = MakeRunner(2, 5), c = MakeRunner(2, 6);
  auto logits = [](ModelRunner& r) {
    return r.Logits({.step = 0, .seqs = {MakeSeq(r, 1, 1, Prompt(4, 9))}}).value()[0];
  };
  const auto la = logits(*a);
  EXPECT_EQ(la, logits(*b));
  EXPECT_NE(la, logits(*c));
}

TEST(ModelRunnerTest, TemperatureSamplingIsSeededPerPosition) {
  auto runner = MakeRunner(1);
  SeqInput s = MakeSeq(*runner, 1, 0, Prompt(4, 1));
  s.temperature = 5.0f;  // flat enough that different seeds pick different tokens
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    s.sample_seed = seed;
    const int32_t t1 = runner->Step({.seqs = {s}}, TraceLevel::kOff).value().outputs[0].next_token;
    const int32_t t2 = runner->Step({.seqs = {s}}, TraceLevel::kOff).value().outputs[0].next_token;
    EXPECT_EQ(t1, t2);
    EXPECT_GE(t1, 0);
    EXPECT_LT(t1, 260);
    seen.insert(t1);
  }
  EXPECT_GT(seen.size(), 3u);
}

TEST(ModelRunnerTest, CreateRejectsBadConfigAndOptions) {
  ModelConfig bad = TestConfig();
  bad.top_k = 9;
  EXPECT_THAT(ModelRunner::Create(bad, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("top_k")));
  EXPECT_THAT(ModelRunner::Create(TestConfig(), {.devices = 0}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("devices")));
  EXPECT_THAT(ModelRunner::Create(TestConfig(), {.devices = 1, .page_size = 0}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("page_size")));
}

struct BadCase {
  const char* what;
  void (*mutate)(SeqInput&);
  const char* message;
};

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, RejectedWithPreciseMessageAndNothingWritten) {
  auto runner = MakeRunner(2);
  BatchInput b;
  b.seqs.push_back(MakeSeq(*runner, 1, 0, Prompt(3, 1)));  // valid, comes first
  b.seqs.push_back(MakeSeq(*runner, 2, 1, Prompt(3, 2)));
  GetParam().mutate(b.seqs[1]);
  EXPECT_THAT(runner->Step(b, TraceLevel::kFull),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("seq 1 (request 2)"), HasSubstr(GetParam().message))));
  EXPECT_THAT(runner->Logits(b), StatusIs(StatusCode::kInvalidArgument));
  // The valid seq's first KV slot was never written.
  const float* k = runner->kv_pool(0).K(b.seqs[0].pages[0], 0, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(k[i], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInputTest,
    ::testing::Values(
        BadCase{"device", [](SeqInput& s) { s.device = 2; }, "device 2 is outside [0, 2)"},
        BadCase{"negdevice", [](SeqInput& s) { s.device = -1; }, "device -1 is outside"},
        BadCase{"vocab", [](SeqInput& s) { s.tokens[1] = 260; },
                "token 260 at index 1 is outside the vocab [0, 260)"},
        BadCase{"negtoken", [](SeqInput& s) { s.tokens[0] = -4; }, "token -4 at index 0"},
        BadCase{"empty", [](SeqInput& s) { s.tokens.clear(); }, "has no tokens"},
        BadCase{"pages",
                [](SeqInput& s) {
                  s.pages.resize(1);
                  s.start_pos = 2;
                },
                "page table has 1 pages, 2 needed for 5 positions"},
        BadCase{"pageid", [](SeqInput& s) { s.pages[0] = 256; }, "page id 256 at index 0"},
        BadCase{"maxseq", [](SeqInput& s) { s.start_pos = 94; }, "exceeds max_seq 96"},
        BadCase{"negpos", [](SeqInput& s) { s.start_pos = -1; }, "start_pos -1 is negative"},
        BadCase{"temp", [](SeqInput& s) { s.temperature = -1.0f; }, "temperature"}),
    [](const auto& info) { return std::string(info.param.what); });

TEST(ModelRunnerTest, DuplicateRequestInOneBatchIsRejected) {
  auto runner = MakeRunner(1);
  BatchInput b;
  b.seqs.push_back(MakeSeq(*runner, 3, 0, Prompt(2, 1)));
  b.seqs.push_back(MakeSeq(*runner, 3, 0, Prompt(2, 2)));
  EXPECT_THAT(
      runner->Step(b, TraceLevel::kOff),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("request 3 appears more than once")));
}

}  // namespace
}  // namespace sy::engine
