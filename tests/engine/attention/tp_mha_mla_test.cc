// Tensor-parallel MHA (GQA) and MLA (engine/attention/tp_batch.h): over P
// in-process ranks, every home's output rows from ForwardTp on sharded pools
// equal, bit for bit, what Forward gives on that home's own unsharded pool,
// step after step (two prefill chunks, then decodes); the sharded caches hold
// exactly each rank's block of the unsharded rows; and MLA's block-summed
// Forward still matches the plain reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/attention/mha.h"
#include "engine/attention/mla.h"
#include "engine/distributed/inproc_communicator.h"
#include "tests/engine/attention/reference_mla.h"
#include "tests/engine/attention/tp_attention_util.h"

namespace sy::engine {
namespace {

using testing::RunRanks;
using testing::TpSeqSpec;
using testing::TpStep;

constexpr int kPages = 24;   // pages per device pool
constexpr int kKvLayer = 1;  // of a 2-layer pool: the layer index must be honoured
constexpr int kLayer = 3;    // span label
// Forward (parts = P, fp32, absorbed) against the double-accumulating plain
// reference: the tolerance of mla_test.cc.
constexpr float kRefTol = 2e-5f;

// One attention kind: its pool layout and its per-device layer objects.
class Kind {
 public:
  virtual ~Kind() = default;
  virtual KvPoolOptions Pool() const = 0;
  virtual int hidden() const = 0;
  virtual void Ep(int device, const float* x, int tokens, std::span<const SeqRows> seqs,
                  KvPool* pool, float* out) = 0;
  virtual void Tp(int rank, const float* x, int tokens, const TpBatch& tp, KvPool* pool, float* out,
                  SpanRecorder* rec) = 0;
};

ModelConfig GqaConfig() {
  ModelConfig c = PresetConfig("tiny").value();
  c.layers = 1;
  c.heads = 8;
  c.kv_heads = 4;  // GQA: two query heads per KV head
  c.head_dim = 32;
  EXPECT_TRUE(c.Validate().ok());
  return c;
}

class MhaKind : public Kind {
 public:
  MhaKind(const ModelConfig& c, int parts) : c_(c), w_(BuildWeights(c, 9, {}).layers[0]) {
    for (int d = 0; d < parts; ++d) {
      ep_.push_back(std::make_unique<MhaAttention>(c));
      tp_.push_back(std::make_unique<MhaAttention>(c));
    }
  }
  KvPoolOptions Pool() const override {
    return {.num_pages = kPages,
            .page_size = 4,
            .layers = 2,
            .kv_heads = c_.kv_heads,
            .head_dim = c_.head_dim};
  }
  int hidden() const override { return c_.hidden; }
  void Ep(int device, const float* x, int tokens, std::span<const SeqRows> seqs, KvPool* pool,
          float* out) override {
    ep_[device]->Forward(w_, kKvLayer, kLayer, x, tokens, seqs, pool, out, nullptr);
  }
  void Tp(int rank, const float* x, int tokens, const TpBatch& tp, KvPool* pool, float* out,
          SpanRecorder* rec) override {
    tp_[rank]->ForwardTp(w_, kKvLayer, kLayer, x, tokens, tp, pool, out, rec);
  }

 private:
  const ModelConfig c_;
  const LayerWeights w_;
  std::vector<std::unique_ptr<MhaAttention>> ep_, tp_;
};

// 0: tiny-hybrid (Q-LoRA, gate); 1: without Q-LoRA (gate on).
ModelConfig MlaConfig(int variant) {
  ModelConfig c = PresetConfig("tiny-hybrid").value();
  if (variant == 1) c.q_lora_rank = 0;
  EXPECT_TRUE(c.mla_gate);
  EXPECT_TRUE(c.Validate().ok());
  return c;
}

MlaWeights MlaLayerWeights(const ModelConfig& c) {
  ModelWeights w = BuildWeights(c, 5, {});
  for (int l = 0; l < c.layers; ++l) {
    if (c.attention(l) == AttentionKind::kMla) return w.layers[l].mla;
  }
  ADD_FAILURE() << "no MLA layer in " << c.name;
  return {};
}

class MlaKind : public Kind {
 public:
  MlaKind(const ModelConfig& c, int parts) : c_(c), w_(MlaLayerWeights(c)) {
    for (int d = 0; d < parts; ++d) {
      ep_.push_back(std::make_unique<MlaAttention>(c, parts));
      tp_.push_back(std::make_unique<MlaAttention>(c, parts));
    }
  }
  KvPoolOptions Pool() const override {
    return {.num_pages = kPages, .page_size = 4, .layers = 2, .latent_dim = c_.mla_latent_dim()};
  }
  int hidden() const override { return c_.hidden; }
  void Ep(int device, const float* x, int tokens, std::span<const SeqRows> seqs, KvPool* pool,
          float* out) override {
    ep_[device]->Forward(w_, kKvLayer, kLayer, x, tokens, seqs, pool, out, nullptr);
  }
  void Tp(int rank, const float* x, int tokens, const TpBatch& tp, KvPool* pool, float* out,
          SpanRecorder* rec) override {
    tp_[rank]->ForwardTp(w_, kKvLayer, kLayer, x, tokens, tp, pool, out, rec);
  }
  const ModelConfig& config() const { return c_; }
  const MlaWeights& weights() const { return w_; }

 private:
  const ModelConfig c_;
  const MlaWeights w_;
  std::vector<std::unique_ptr<MlaAttention>> ep_, tp_;
};

struct SeqPlan {
  int home = 0;
  int len = 0;  // tokens over the whole schedule
};

// Runs the same steps through EP (each home alone on its own pool) and TP
// (all ranks together on sharded pools) and compares every home's rows.
class TpHarness {
 public:
  TpHarness(Kind* kind, int parts, std::vector<SeqPlan> plan)
      : kind_(kind), parts_(parts), h_(kind->hidden()) {
    // Home-major, as TpStep orders them, so seq s is entry s of every step.
    std::stable_sort(plan.begin(), plan.end(),
                     [](const SeqPlan& a, const SeqPlan& b) { return a.home < b.home; });
    plan_ = std::move(plan);
    for (int d = 0; d < parts; ++d) {
      ep_pools_.push_back(std::make_unique<KvPool>(kind->Pool()));
      tp_pools_.push_back(std::make_unique<KvPool>(kind->Pool()));
      EXPECT_TRUE(tp_pools_.back()->SetShards(parts).ok());
      // Burn a page on odd devices so page ids differ between homes.
      std::vector<int32_t> burn;
      if (d % 2 == 1) {
        EXPECT_TRUE(ep_pools_[d]->Allocate(1, &burn).ok());
      }
    }
    const int ps = ep_pools_[0]->page_size();
    for (size_t s = 0; s < plan_.size(); ++s) {
      std::vector<int32_t> pages;
      EXPECT_TRUE(
          ep_pools_[plan_[s].home]->Allocate(KvPool::PagesFor(plan_[s].len, ps), &pages).ok());
      if (s % 2 == 1) std::reverse(pages.begin(), pages.end());
      pages_.push_back(std::move(pages));
      std::vector<std::vector<float>> x(plan_[s].len, std::vector<float>(h_));
      for (int t = 0; t < plan_[s].len; ++t) {
        FillTensor(100 + s, "x" + std::to_string(t), 1.0f, 0.0f, x[t].data(), h_);
      }
      x_.push_back(std::move(x));
      delta_.emplace_back(plan_[s].len, std::vector<float>(h_));
    }
    done_.assign(plan_.size(), 0);
  }

  // One step: seq s gets chunk[s] new tokens (0: sits this step out).
  // Expects TP == EP bit for bit on every home's rows.
  void Step(const std::vector<int>& chunk) {
    ++step_;
    std::vector<TpSeqSpec> specs;
    std::vector<int> ids;
    for (size_t s = 0; s < plan_.size(); ++s) {
      if (chunk[s] == 0) continue;
      ASSERT_LE(done_[s] + chunk[s], plan_[s].len) << "schedule overruns seq " << s;
      specs.push_back(
          {.home = plan_[s].home, .n = chunk[s], .start_pos = done_[s], .pages = pages_[s]});
      ids.push_back(static_cast<int>(s));
    }
    const TpStep step(specs, parts_, kPages, /*slots=*/1);
    std::vector<std::vector<float>> x(parts_), base(parts_), ep(parts_), tp(parts_);
    for (int d = 0; d < parts_; ++d) {
      const size_t n = static_cast<size_t>(step.local_rows(d)) * h_;
      x[d].resize(n);
      base[d].resize(n);
      FillTensor(step_, "residual" + std::to_string(d), 2.0f, 0.0f, base[d].data(), n);
    }
    // Local rows: each home's seqs in `all` order.
    std::vector<int> next(parts_, 0);
    for (size_t k = 0; k < ids.size(); ++k) {
      const int s = ids[k], d = plan_[s].home;
      for (int i = 0; i < chunk[s]; ++i) {
        std::copy(x_[s][done_[s] + i].begin(), x_[s][done_[s] + i].end(),
                  &x[d][static_cast<size_t>(next[d] + i) * h_]);
      }
      next[d] += chunk[s];
    }
    for (int d = 0; d < parts_; ++d) {
      ep[d] = base[d];
      tp[d] = base[d];
      const std::vector<SeqRows> local = step.EpLocal(d);
      kind_->Ep(d, x[d].data(), step.local_rows(d), local, ep_pools_[d].get(), ep[d].data());
    }
    InProcCommunicator comm(parts_);
    recs_.clear();
    for (int r = 0; r < parts_; ++r) recs_.emplace_back(r, SpanRecorder::Clock::now());
    for (SpanRecorder& rec : recs_) rec.Reset(TraceLevel::kFull);
    RunRanks(parts_, [&](int r) {
      kind_->Tp(r, x[r].data(), step.local_rows(r), step.For(r, &comm), tp_pools_[r].get(),
                tp[r].data(), &recs_[r]);
    });
    for (int d = 0; d < parts_; ++d) {
      ASSERT_EQ(ep[d].size(), tp[d].size());
      if (ep[d].empty()) continue;
      EXPECT_EQ(std::memcmp(ep[d].data(), tp[d].data(), ep[d].size() * sizeof(float)), 0)
          << "step " << step_ << " home " << d << ": max |tp - ep| " << MaxDiff(ep[d], tp[d]);
      EXPECT_GT(MaxDiff(ep[d], base[d]), 0.0f) << "attention added nothing on home " << d;
    }
    std::fill(next.begin(), next.end(), 0);
    for (size_t k = 0; k < ids.size(); ++k) {
      const int s = ids[k], d = plan_[s].home;
      for (int i = 0; i < chunk[s]; ++i) {
        for (int j = 0; j < h_; ++j) {
          const size_t e = static_cast<size_t>(next[d] + i) * h_ + j;
          delta_[s][done_[s] + i][j] = ep[d][e] - base[d][e];
        }
      }
      next[d] += chunk[s];
      done_[s] += chunk[s];
    }
  }

  // Every cached row of every seq so far: rank r's sharded pool holds block r
  // of the home's unsharded row, at storage page home * kPages + page.
  void ExpectShardedCaches() const {
    const KvPool& ref = *ep_pools_[0];
    const int ps = ref.page_size(), entries = ref.entries();
    const int64_t width = ref.row_floats() / parts_;
    for (size_t s = 0; s < plan_.size(); ++s) {
      const int home = plan_[s].home;
      for (int pos = 0; pos < done_[s]; ++pos) {
        const int page = pages_[s][pos / ps], slot = pos % ps;
        for (int e = 0; e < entries; ++e) {
          const float* full = Row(*ep_pools_[home], e, page, slot);
          for (int r = 0; r < parts_; ++r) {
            const float* part = Row(*tp_pools_[r], e, home * kPages + page, slot);
            ASSERT_EQ(std::memcmp(full + r * width, part, width * sizeof(float)), 0)
                << "seq " << s << " pos " << pos << " entry " << e << " rank " << r;
          }
        }
      }
    }
  }

  // The layer's output (out minus residual) of seq s at position pos, from EP.
  const std::vector<float>& delta(int s, int pos) const { return delta_[s][pos]; }
  const std::vector<std::vector<float>>& inputs(int s) const { return x_[s]; }
  int seqs() const { return static_cast<int>(plan_.size()); }
  int done(int s) const { return done_[s]; }
  // Last TP step's spans of rank r.
  const SpanRecorder& rec(int r) const { return recs_[r]; }

 private:
  static float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
  }
  static const float* Row(const KvPool& pool, int entry, int page, int slot) {
    if (pool.entries() == 1) return pool.Latent(page, kKvLayer, slot);
    return entry == 0 ? pool.K(page, kKvLayer, slot) : pool.V(page, kKvLayer, slot);
  }

  Kind* kind_;
  const int parts_, h_;
  std::vector<SeqPlan> plan_;
  std::vector<std::unique_ptr<KvPool>> ep_pools_, tp_pools_;
  std::vector<std::vector<int32_t>> pages_;
  std::vector<std::vector<std::vector<float>>> x_, delta_;
  std::vector<int> done_;
  std::vector<SpanRecorder> recs_;
  int step_ = 0;
};

// Two prefill chunks (the first one long enough for the sgemm path), then
// decodes with a seq sitting out now and then.
const std::vector<std::vector<int>> kSchedule = {{13, 5, 4, 6}, {5, 3, 2, 4}, {1, 1, 1, 1},
                                                 {1, 0, 1, 1},  {1, 1, 1, 1}, {1, 1, 0, 1}};

// Seqs on different homes; with P = 4, device 1 homes none.
std::vector<SeqPlan> Plan(int parts) {
  std::vector<int> homes = parts == 2 ? std::vector<int>{0, 1, 0, 1} : std::vector<int>{0, 2, 2, 3};
  std::vector<SeqPlan> plan;
  for (size_t s = 0; s < homes.size(); ++s) {
    int len = 0;
    for (const std::vector<int>& c : kSchedule) len += c[s];
    plan.push_back({homes[s], len});
  }
  return plan;
}

// Plan() sorted home-major reorders seqs; the schedule follows the same order.
std::vector<std::vector<int>> Schedule(int parts) {
  std::vector<SeqPlan> plan = Plan(parts);
  std::vector<int> order(plan.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return plan[a].home < plan[b].home; });
  std::vector<std::vector<int>> out;
  for (const std::vector<int>& c : kSchedule) {
    std::vector<int> row;
    for (int s : order) row.push_back(c[s]);
    out.push_back(row);
  }
  return out;
}

void RunSchedule(int parts, TpHarness* h) {
  for (const std::vector<int>& chunk : Schedule(parts)) {
    h->Step(chunk);
    if (::testing::Test::HasFatalFailure()) return;
  }
  h->ExpectShardedCaches();
}

class TpMhaTest : public ::testing::TestWithParam<int> {};  // parts

TEST_P(TpMhaTest, GqaTensorParallelEqualsDataParallelBitForBit) {
  const int parts = GetParam();
  MhaKind kind(GqaConfig(), parts);
  TpHarness h(&kind, parts, Plan(parts));
  RunSchedule(parts, &h);
  // The last step's spans: every rank ran its heads over all rows.
  for (int r = 0; r < parts; ++r) {
    std::set<std::string> names;
    for (const telemetry::Span& s : h.rec(r).spans()) names.insert(s.name);
    EXPECT_TRUE(names.count("attention") && names.count("mha_tp_scatter") &&
                names.count("mha_tp_gather"))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Parts, TpMhaTest, ::testing::Values(2, 4));

class TpMlaTest : public ::testing::TestWithParam<std::tuple<int, int>> {};  // variant, parts

TEST_P(TpMlaTest, TensorParallelEqualsDataParallelBitForBit) {
  const int parts = std::get<1>(GetParam());
  MlaKind kind(MlaConfig(std::get<0>(GetParam())), parts);
  TpHarness h(&kind, parts, Plan(parts));
  RunSchedule(parts, &h);
  // Forward with parts = P (what TP reproduces) against the plain reference.
  for (int s = 0; s < h.seqs(); ++s) {
    const ref::MlaResult want = ref::Mla(kind.config(), kind.weights(), h.inputs(s));
    float err = 0.0f;
    for (int pos = 0; pos < h.done(s); ++pos) {
      for (int j = 0; j < kind.config().hidden; ++j) {
        err = std::max(err, std::abs(h.delta(s, pos)[j] - want.out[pos][j]));
      }
    }
    EXPECT_LT(err, kRefTol) << "seq " << s;
  }
  // The last step's spans: a home's core spans count every row of the step.
  const std::vector<std::vector<int>> schedule = Schedule(parts);
  int total = 0;
  for (int v : schedule.back()) total += v;
  for (int r = 0; r < parts; ++r) {
    std::set<std::string> names;
    for (const telemetry::Span& s : h.rec(r).spans()) {
      names.insert(s.name);
      if (s.name == "mla_scores" || s.name == "mla_pv") {
        EXPECT_EQ(s.tokens, total) << s.name;
        EXPECT_GT(s.flops, 0) << s.name;
      }
    }
    for (const char* n : {"mla_scores", "mla_pv", "mla_tp_scatter", "mla_tp_scores", "mla_tp_probs",
                          "mla_tp_olat"}) {
      EXPECT_TRUE(names.count(n)) << "rank " << r << " lacks " << n;
    }
    // Only homes with rows run the per-token home work.
    EXPECT_EQ(names.count("mla_o_proj") > 0, parts != 4 || r != 1) << "rank " << r;
  }
}

std::string MlaCaseName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return std::string(std::get<0>(info.param) == 0 ? "TinyHybrid" : "NoQLora") + "_P" +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Variants, TpMlaTest,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Values(2, 4)),
                         MlaCaseName);

// A step with no rows anywhere: every rank still joins every exchange (no
// deadlock) and nothing is written.
TEST(TpAttentionEmptyStepTest, AllRanksJoinWithNoRows) {
  constexpr int kParts = 4;
  MhaKind mha(GqaConfig(), kParts);
  MlaKind mla(MlaConfig(0), kParts);
  for (Kind* kind : std::vector<Kind*>{&mha, &mla}) {
    std::vector<std::unique_ptr<KvPool>> pools;
    for (int r = 0; r < kParts; ++r) {
      pools.push_back(std::make_unique<KvPool>(kind->Pool()));
      ASSERT_TRUE(pools.back()->SetShards(kParts).ok());
    }
    const TpStep step({}, kParts, kPages, 1);
    InProcCommunicator comm(kParts);
    std::vector<SpanRecorder> recs;
    for (int r = 0; r < kParts; ++r) recs.emplace_back(r, SpanRecorder::Clock::now());
    for (SpanRecorder& rec : recs) rec.Reset(TraceLevel::kFull);
    RunRanks(kParts, [&](int r) {
      kind->Tp(r, nullptr, 0, step.For(r, &comm), pools[r].get(), nullptr, &recs[r]);
    });
    const size_t exchanges = kind == &mha ? 2 : 4;
    for (int r = 0; r < kParts; ++r) {
      ASSERT_EQ(recs[r].spans().size(), exchanges) << "rank " << r;
      for (const telemetry::Span& s : recs[r].spans()) {
        EXPECT_EQ(s.kind, "comm");
        EXPECT_EQ(s.bytes, 0);
      }
    }
    for (int r = 0; r < kParts; ++r) EXPECT_EQ(comm.bytes_sent(r), 0);
  }
}

}  // namespace
}  // namespace sy::engine
