// The linear layers' prefix-cache checkpoints: a snapshot taken after the
// first m new tokens of a step (mid-chunk, at the end, in decode) holds
// exactly the state of running only those tokens, and taking it changes
// nothing else. Tolerances as in linear_attention_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/attention/linear_attention.h"
#include "tests/engine/attention/linear_test_util.h"
#include "tests/engine/attention/reference_linear.h"

namespace sy::engine {
namespace {

// Prefix-cache checkpoints: in one mixed batch, each seq snapshots this
// layer's state after its first m new tokens into its own checkpoint slot.
// The snapshot must equal the state of running only those tokens (the float
// layer: 2e-5 rel, it runs the same core split differently; the double
// reference: 1e-4 rel for S, 1e-5 rel for the conv state, as above), and
// taking it must not change the outputs or final states (2e-5 rel).
TEST_P(LayerTest, CheckpointHoldsTheStateAfterItsTokens) {
  struct Case {
    int from, n, m;  // start_pos, new tokens, checkpoint after m of them
  };
  const std::vector<Case> cases = {
      {0, 100, 37},   // mid-chunk of a chunk-wise prefill
      {0, 100, 100},  // at the end of the step
      {0, 100, 1},    // after the first token
      {30, 70, 45},   // a continued prefill chunk
      {99, 1, 1},     // decode
  };
  const int k = static_cast<int>(cases.size()), h = config_.hidden;
  const size_t sf = MakePool(1)->options().state_floats, cf = MakePool(1)->options().conv_floats;
  std::vector<std::vector<float>> xs;
  for (int c = 0; c < k; ++c) xs.push_back(Input(cases[c].from + cases[c].n, 20 + c));
  LinearAttention lin(config_);
  // Working slots 0..k-1 in every pool; checkpoints in slots k..2k-1 of ck.
  auto ck = MakePool(2 * k), plain = MakePool(k), first = MakePool(k);
  for (int c = 0; c < k; ++c) {
    const Case& cs = cases[c];
    if (cs.from > 0) {
      for (StatePool* pool : {ck.get(), plain.get(), first.get()}) {
        Alone(&lin, pool, xs[c], 0, cs.from, c);
      }
    }
    Alone(&lin, first.get(), xs[c], cs.from, cs.m, c);  // only the first m tokens
    // Stale leftovers in the checkpoint slot: every value must be overwritten.
    std::fill(ck->State(k + c, state_layer_), ck->State(k + c, state_layer_) + sf,
              std::numeric_limits<float>::quiet_NaN());
    if (cf > 0) std::fill(ck->Conv(k + c, state_layer_), ck->Conv(k + c, state_layer_) + cf, 1e6f);
  }
  std::vector<float> rows;
  std::vector<SeqRows> with, without;
  for (int c = 0; c < k; ++c) {
    const Case& cs = cases[c];
    const SeqRows sq{
        .row = static_cast<int>(rows.size()) / h, .n = cs.n, .start_pos = cs.from, .state_slot = c};
    without.push_back(sq);
    with.push_back(sq);
    with.back().checkpoint_slot = k + c;
    with.back().checkpoint_at = cs.m;
    rows.insert(rows.end(), xs[c].begin() + static_cast<size_t>(cs.from) * h, xs[c].end());
  }
  const std::vector<float> got = Step(&lin, ck.get(), rows.data(), with);
  const std::vector<float> want = Step(&lin, plain.get(), rows.data(), without);
  const double scale = std::max(1.0, MaxAbs(want));
  EXPECT_LE(MaxAbsDiff(got, want), 2e-5 * scale) << "outputs, tol 2e-5 * " << scale;

  auto slot = [&](const StatePool& pool, int s, bool conv) {
    const float* p = conv ? pool.Conv(s, state_layer_) : pool.State(s, state_layer_);
    return std::vector<float>(p, p + (conv ? cf : sf));
  };
  for (int c = 0; c < k; ++c) {
    const Case& cs = cases[c];
    SCOPED_TRACE("start_pos " + std::to_string(cs.from) + " n " + std::to_string(cs.n) + " m " +
                 std::to_string(cs.m));
    const std::vector<float> fin = slot(*plain, c, false), snap = slot(*ck, k + c, false);
    EXPECT_LE(MaxAbsDiff(slot(*ck, c, false), fin), 2e-5 * MaxAbs(fin)) << "final state";
    const std::vector<float> alone = slot(*first, c, false);
    EXPECT_LE(MaxAbsDiff(snap, alone), 2e-5 * MaxAbs(alone)) << "checkpoint vs first m tokens";
    ref::RefLinearState st = ref::RefLinearZeroState(config_);
    ref::RefLinearForward(config_, w(), xs[c].data(), cs.from + cs.m, &st);
    EXPECT_LE(MaxAbsDiff(snap, st.s), 1e-4 * MaxAbs(st.s)) << "checkpoint vs reference";
    if (cf > 0) {
      const std::vector<float> conv = slot(*ck, k + c, true);
      EXPECT_LE(MaxAbsDiff(conv, slot(*first, c, true)), 1e-5 * MaxAbs(st.conv)) << "conv";
      EXPECT_LE(MaxAbsDiff(conv, st.conv), 1e-5 * MaxAbs(st.conv)) << "conv vs reference";
      const std::vector<float> fin_conv = slot(*plain, c, true);
      EXPECT_LE(MaxAbsDiff(slot(*ck, c, true), fin_conv), 1e-5 * MaxAbs(fin_conv)) << "final conv";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, LayerTest, ::testing::Values("tiny-hybrid", "tiny-gla"),
                         [](const auto& info) {
                           return info.param == "tiny-hybrid" ? std::string("TinyHybrid")
                                                              : std::string("TinyGla");
                         });

}  // namespace
}  // namespace sy::engine
