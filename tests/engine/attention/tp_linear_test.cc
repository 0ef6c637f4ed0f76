// LinearAttention::ForwardTp (KDA and GLA with attention tensor parallel over
// heads, tp_batch.h) against the data-parallel Forward: P homes each run
// Forward over their own seqs on an unsharded pool; the same steps run as
// ForwardTp on P ranks whose pools are sharded P ways. Every home's output
// rows must match bit for bit at every step, and so must every slot's state
// (rank r's block of the home's slot == rank r's storage slot home * slots +
// slot), checkpoint slots included. Steps: a prefill chunk with checkpoints,
// a second chunk with a seq seeded from a checkpoint, then decode steps, with
// a home that has no rows.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/attention/linear_attention.h"
#include "engine/distributed/inproc_communicator.h"
#include "tests/engine/attention/linear_test_util.h"
#include "tests/engine/attention/tp_attention_util.h"

namespace sy::engine {
namespace {

using testing::RunRanks;
using testing::TpSeqSpec;
using testing::TpStep;

constexpr int kSlots = 8;

struct Case {
  std::string preset;
  int parts = 2;
  PrefillMode mode = PrefillMode::kChunked;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.preset == "tiny-hybrid" ? "Kda" : "Gla";
  s += "P" + std::to_string(info.param.parts);
  s += info.param.mode == PrefillMode::kChunked ? "Chunked" : "Recurrent";
  return s;
}

class TpLinearTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    Result<ModelConfig> c = PresetConfig(GetParam().preset);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = c.value();
    parts_ = GetParam().parts;
    ASSERT_EQ(config_.heads % parts_, 0);
    weights_ = BuildWeights(config_, 11, {});
    for (int l = 0; l < config_.layers && layer_ < 0; ++l) {
      if (!config_.is_full_attention(l)) layer_ = l;
    }
    ASSERT_GE(layer_, 0);
    state_layer_ = config_.state_layer(layer_);
    hist_ = config_.linear_kind == AttentionKind::kKda ? config_.conv_kernel - 1 : 0;
    dd_ = config_.heads * config_.linear_head_dim;
    const LinearAttentionOptions lo{.chunk = 16, .prefill = GetParam().mode};
    for (int d = 0; d < parts_; ++d) {
      ep_pool_.push_back(MakePool());
      tp_pool_.push_back(MakePool());
      ASSERT_TRUE(tp_pool_.back()->SetShards(parts_).ok());
      ep_lin_.push_back(std::make_unique<LinearAttention>(config_, lo));
      tp_lin_.push_back(std::make_unique<LinearAttention>(config_, lo));
    }
    // Stale, distinct contents in every slot, laid out identically in both
    // readings: fresh seqs must zero them, checkpoints overwrite them.
    for (int d = 0; d < parts_; ++d) {
      for (int s = 0; s < kSlots; ++s) {
        StatePool& ep = *ep_pool_[d];
        const std::vector<float> st = Uniform(ep.state_floats(), 1000 + 31 * d + s, -1.0f, 1.0f);
        std::copy(st.begin(), st.end(), ep.State(s, state_layer_));
        if (hist_ > 0) {
          const std::vector<float> cv = Uniform(ep.conv_floats(), 2000 + 31 * d + s, -1.0f, 1.0f);
          std::copy(cv.begin(), cv.end(), ep.Conv(s, state_layer_));
        }
        for (int r = 0; r < parts_; ++r) {
          ForBlocks(d, s, r, [](const float* ep_block, float* tp_block, size_t n) {
            std::memcpy(tp_block, ep_block, n * sizeof(float));
          });
        }
      }
    }
  }

  std::unique_ptr<StatePool> MakePool() const {
    StatePoolOptions o;
    o.slots = kSlots;
    o.layers = config_.linear_layers();
    o.state_floats = config_.state_floats_per_layer() - config_.conv_state_floats();
    o.conv_floats = config_.conv_state_floats();
    o.conv_groups = hist_ > 0 ? 3 * hist_ : 0;
    return std::make_unique<StatePool>(o);
  }

  // fn(EP block, TP block, floats) for each block rank r holds of slot s of
  // home d: its heads' recurrent state, then its channels of each conv group.
  template <typename Fn>
  void ForBlocks(int d, int s, int r, Fn fn) {
    StatePool& ep = *ep_pool_[d];
    StatePool& tp = *tp_pool_[r];
    const int storage = d * kSlots + s;
    const size_t sf = tp.state_floats(), dl = dd_ / parts_;
    fn(ep.State(s, state_layer_) + r * sf, tp.State(storage, state_layer_), sf);
    for (int g = 0; g < 3 * hist_; ++g) {
      fn(ep.Conv(s, state_layer_) + g * dd_ + r * dl, tp.Conv(storage, state_layer_) + g * dl, dl);
    }
  }

  // Runs one step both ways and compares outputs and every slot.
  void RunStep(const std::vector<TpSeqSpec>& specs, int step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const TpStep tp_step(specs, parts_, /*num_pages=*/1, kSlots);
    const int h = config_.hidden;
    const LinearAttnWeights& w = weights_.layers[layer_].linear;
    std::vector<std::vector<float>> x(parts_), res(parts_), ep_out(parts_), tp_out(parts_);
    for (int d = 0; d < parts_; ++d) {
      const size_t n = static_cast<size_t>(tp_step.local_rows(d)) * h;
      x[d] = Uniform(n, 100 * step + d, -1.5f, 1.5f);
      res[d] = Uniform(n, 100 * step + 50 + d, -1.0f, 1.0f);
      ep_out[d] = res[d];
      tp_out[d] = res[d];
      ep_lin_[d]->Forward(w, state_layer_, layer_, x[d].data(), tp_step.local_rows(d),
                          tp_step.EpLocal(d), ep_pool_[d].get(), ep_out[d].data(), nullptr);
    }
    InProcCommunicator comm(parts_);
    std::vector<SpanRecorder> recs;
    for (int r = 0; r < parts_; ++r) {
      recs.emplace_back(r, SpanRecorder::Clock::now());
      recs.back().Reset(TraceLevel::kFull);
    }
    RunRanks(parts_, [&](int r) {
      tp_lin_[r]->ForwardTp(w, state_layer_, layer_, x[r].data(), tp_step.local_rows(r),
                            tp_step.For(r, &comm), tp_pool_[r].get(), tp_out[r].data(), &recs[r]);
    });
    for (int d = 0; d < parts_; ++d) {
      SCOPED_TRACE("home " + std::to_string(d));
      ASSERT_EQ(ep_out[d].size(), tp_out[d].size());
      if (!ep_out[d].empty()) {
        EXPECT_NE(ep_out[d], res[d]) << "the layer added nothing";
      }
      EXPECT_EQ(0, std::memcmp(ep_out[d].data(), tp_out[d].data(), ep_out[d].size() * 4))
          << "outputs differ, max abs diff " << MaxAbsDiff(ep_out[d], tp_out[d]);
      for (int s = 0; s < kSlots; ++s) {
        for (int r = 0; r < parts_; ++r) {
          ForBlocks(d, s, r, [&](const float* a, const float* b, size_t n) {
            EXPECT_EQ(0, std::memcmp(a, b, n * sizeof(float)))
                << "slot " << s << " rank " << r << " block differs";
          });
        }
      }
    }
    // Spans: each rank joins both all-to-alls; only ranks with rows project.
    for (int r = 0; r < parts_; ++r) {
      std::multiset<std::string> names;
      for (const telemetry::Span& sp : recs[r].spans()) names.insert(sp.name);
      EXPECT_EQ(names.count("linear_tp_scatter"), 1u) << "rank " << r;
      EXPECT_EQ(names.count("linear_tp_gather"), 1u) << "rank " << r;
      const size_t own = tp_step.local_rows(r) > 0 ? 1 : 0;
      EXPECT_EQ(names.count("linear_proj"), own) << "rank " << r;
      EXPECT_EQ(names.count("linear_out"), own) << "rank " << r;
    }
  }

  // Copies slot src to dst of home d's pool, in both readings.
  void CopySlot(int d, int src, int dst) {
    ep_pool_[d]->Copy(src, dst);
    for (int r = 0; r < parts_; ++r) tp_pool_[r]->Copy(d * kSlots + src, d * kSlots + dst);
  }

  ModelConfig config_;
  ModelWeights weights_;
  int parts_ = 0, layer_ = -1, state_layer_ = -1, hist_ = 0, dd_ = 0;
  std::vector<std::unique_ptr<StatePool>> ep_pool_, tp_pool_;
  std::vector<std::unique_ptr<LinearAttention>> ep_lin_, tp_lin_;
};

// Seqs A, B, E on home 0, C on home 1, D on the last home (with P = 4, home 2
// never has rows; step 4 leaves home 0 without rows too).
TEST_P(TpLinearTest, MatchesDataParallelBitForBit) {
  const int last = parts_ - 1;
  auto seq = [](int home, int n, int pos, int slot, int ck = -1, int at = 0) {
    return TpSeqSpec{.home = home,
                     .n = n,
                     .start_pos = pos,
                     .pages = {},
                     .state_slot = slot,
                     .checkpoint_slot = ck,
                     .checkpoint_at = at};
  };
  // 1: prefill chunk; A checkpoints mid-chunk, C at its end.
  RunStep({seq(0, 70, 0, 0, 4, 37), seq(0, 5, 0, 1), seq(1, 100, 0, 0, 5, 100), seq(last, 1, 0, 2)},
          1);
  // 2: E starts from A's checkpoint (37 tokens); second chunks, B decodes and
  // checkpoints, C checkpoints again.
  CopySlot(0, 4, 3);
  RunStep({seq(0, 40, 70, 0), seq(0, 1, 5, 1, 6, 1), seq(1, 30, 100, 0, 5, 10), seq(last, 64, 1, 2),
           seq(0, 20, 37, 3)},
          2);
  // 3..6: decode; step 4 has no seq on home 0, step 5 checkpoints A.
  int pa = 110, pb = 6, pc = 130, pd = 65, pe = 57;
  for (int step = 3; step <= 6; ++step) {
    std::vector<TpSeqSpec> specs;
    if (step != 4) {
      specs.push_back(step == 5 ? seq(0, 1, pa++, 0, 7, 1) : seq(0, 1, pa++, 0));
      specs.push_back(seq(0, 1, pb++, 1));
      specs.push_back(seq(0, 1, pe++, 3));
    }
    specs.push_back(seq(1, 1, pc++, 0));
    specs.push_back(seq(last, 1, pd++, 2));
    RunStep(specs, step);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, TpLinearTest,
                         ::testing::Values(Case{"tiny-hybrid", 2, PrefillMode::kChunked},
                                           Case{"tiny-hybrid", 4, PrefillMode::kChunked},
                                           Case{"tiny-hybrid", 2, PrefillMode::kRecurrent},
                                           Case{"tiny-hybrid", 4, PrefillMode::kRecurrent},
                                           Case{"tiny-gla", 2, PrefillMode::kChunked},
                                           Case{"tiny-gla", 4, PrefillMode::kChunked},
                                           Case{"tiny-gla", 2, PrefillMode::kRecurrent},
                                           Case{"tiny-gla", 4, PrefillMode::kRecurrent}),
                         CaseName);

}  // namespace
}  // namespace sy::engine
