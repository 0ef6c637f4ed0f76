// Tests of engine/attention/linear_attention.h: the KDA / GLA cores (chunk-wise
// and recurrent) against the literal per-token recurrence, and the whole layer
// against tests/engine/attention/reference_linear.h.
//
// Tolerances: every comparison with the double-precision reference asserts
// max abs error <= 1e-4 * (largest |reference value|, at least 1 for layer
// outputs). Paths that must agree to float rounding only (one batch vs seqs
// alone, split vs whole prefill) use 2e-5 of the same scale; paths that run
// the identical float operations (a stale slot vs a fresh one) must match
// bit for bit.
#include "engine/attention/linear_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/engine/attention/linear_test_util.h"
#include "tests/engine/attention/reference_linear.h"

namespace sy::engine {
namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ---------------------------------------------------------------- the cores

// One head's inputs, packed like the layer packs them: row t holds
// q | k | v | g | o at columns 0, d, 2d, 3d, 4d, with a few padding columns so
// the stride differs from every block width.
struct CoreInputs {
  int d = 0, tokens = 0, stride = 0, beta_stride = 3;
  std::vector<float> rows, beta, s0;
  float* col(int i) { return rows.data() + i * d; }
};

CoreInputs MakeCore(bool kda, int d, int tokens, bool strong, uint32_t seed) {
  CoreInputs in;
  in.d = d;
  in.tokens = tokens;
  in.stride = 5 * d + 3;
  in.rows = Uniform(static_cast<size_t>(tokens) * in.stride, seed, -1.0f, 1.0f);
  std::vector<float> z = Uniform(static_cast<size_t>(tokens) * d, seed + 1, -3.0f, 3.0f);
  for (int t = 0; t < tokens; ++t) {
    float* r = in.rows.data() + static_cast<size_t>(t) * in.stride;
    for (int part = 0; part < 2; ++part) {  // q, k
      float* x = r + part * d;
      double n2 = 0.0;
      for (int c = 0; c < d; ++c) n2 += x[c] * x[c];
      const double norm = kda ? std::sqrt(n2) : 1.0;
      const double scale = part == 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
      for (int c = 0; c < d; ++c) x[c] = static_cast<float>(x[c] / norm * scale);
    }
    for (int c = 0; c < d; ++c) {
      // Strong: the -5 lower-bound gate, per-token decays down to e^-4.7, so
      // in-chunk cumulative decays reach e^-300. Weak: decays 0.95 .. 0.9995.
      const double zz = z[static_cast<size_t>(t) * d + c];
      r[3 * d + c] =
          static_cast<float>(strong ? -5.0 * Sigmoid(zz) : -0.05 * (zz + 3.0) / 6.0 - 5e-4);
      r[4 * d + c] = std::numeric_limits<float>::quiet_NaN();  // must be overwritten
    }
  }
  in.beta = Uniform(static_cast<size_t>(tokens) * in.beta_stride, seed + 2, -3.0f, 3.0f);
  for (float& b : in.beta) b = static_cast<float>(Sigmoid(b));
  in.s0 = Uniform(static_cast<size_t>(d) * d, seed + 3, -1.0f, 1.0f);
  return in;
}

struct CoreResult {
  std::vector<double> o, s;
};

CoreResult ReferenceCore(bool kda, const CoreInputs& in) {
  const int d = in.d;
  CoreResult r;
  r.s.assign(in.s0.begin(), in.s0.end());
  r.o.resize(static_cast<size_t>(in.tokens) * d);
  std::vector<double> q(d), k(d), v(d), g(d);
  for (int t = 0; t < in.tokens; ++t) {
    const float* row = in.rows.data() + static_cast<size_t>(t) * in.stride;
    for (int c = 0; c < d; ++c) {
      q[c] = row[c];
      k[c] = row[d + c];
      v[c] = row[2 * d + c];
      g[c] = row[3 * d + c];
    }
    double* o = r.o.data() + static_cast<size_t>(t) * d;
    if (kda) {
      ref::KdaStep(d, q.data(), k.data(), v.data(), g.data(),
                   in.beta[static_cast<size_t>(t) * in.beta_stride], &r.s, o);
    } else {
      ref::GlaStep(d, q.data(), k.data(), v.data(), g.data(), &r.s, o);
    }
  }
  return r;
}

// chunk == 0 runs the recurrence.
CoreResult RunCore(bool kda, CoreInputs in, int chunk) {
  const int d = in.d;
  std::vector<float> s = in.s0, scratch;
  float* q = in.col(0);
  float* o = in.col(4);
  if (kda && chunk > 0) {
    KdaChunked(q, q + d, q + 2 * d, q + 3 * d, in.beta.data(), in.beta_stride, in.tokens, d,
               in.stride, chunk, s.data(), o, &scratch);
  } else if (kda) {
    KdaRecurrent(q, q + d, q + 2 * d, q + 3 * d, in.beta.data(), in.beta_stride, in.tokens, d,
                 in.stride, s.data(), o);
  } else if (chunk > 0) {
    GlaChunked(q, q + d, q + 2 * d, q + 3 * d, in.tokens, d, in.stride, chunk, s.data(), o,
               &scratch);
  } else {
    GlaRecurrent(q, q + d, q + 2 * d, q + 3 * d, in.tokens, d, in.stride, s.data(), o);
  }
  CoreResult r;
  r.s.assign(s.begin(), s.end());
  for (int t = 0; t < in.tokens; ++t) {
    const float* ot = o + static_cast<size_t>(t) * in.stride;
    r.o.insert(r.o.end(), ot, ot + d);
  }
  return r;
}

struct CoreCase {
  bool kda;
  int d;
  bool strong;
};

void PrintTo(const CoreCase& c, std::ostream* os) {
  *os << (c.kda ? "kda" : "gla") << " d=" << c.d << (c.strong ? " strong" : " weak") << " decay";
}

class CoreTest : public ::testing::TestWithParam<CoreCase> {};

TEST_P(CoreTest, ChunkedAndRecurrentMatchLiteralRecurrence) {
  const CoreCase cc = GetParam();
  // 200 tokens: not a multiple of 64, so the last chunk is partial.
  const CoreInputs in = MakeCore(cc.kda, cc.d, 200, cc.strong, 100 + cc.d);
  const CoreResult want = ReferenceCore(cc.kda, in);
  const double o_scale = MaxAbs(want.o), s_scale = MaxAbs(want.s);
  ASSERT_GT(o_scale, 1e-2);  // a meaningful signal, not decayed to nothing
  for (int chunk : {0, 1, 7, 64}) {
    const CoreResult got = RunCore(cc.kda, in, chunk);
    const std::string what =
        (chunk == 0 ? std::string("recurrent") : "chunk " + std::to_string(chunk));
    EXPECT_LE(MaxAbsDiff(got.o, want.o), 1e-4 * o_scale)
        << what << ": outputs, tol 1e-4 * " << o_scale;
    EXPECT_LE(MaxAbsDiff(got.s, want.s), 1e-4 * s_scale)
        << what << ": final state, tol 1e-4 * " << s_scale;
  }
}

std::string CoreName(const ::testing::TestParamInfo<CoreCase>& info) {
  return std::string(info.param.kda ? "Kda" : "Gla") + "D" + std::to_string(info.param.d) +
         (info.param.strong ? "StrongDecay" : "WeakDecay");
}

INSTANTIATE_TEST_SUITE_P(Cores, CoreTest,
                         ::testing::Values(CoreCase{true, 16, true}, CoreCase{true, 16, false},
                                           CoreCase{true, 64, true}, CoreCase{true, 64, false},
                                           CoreCase{false, 16, true}, CoreCase{false, 16, false},
                                           CoreCase{false, 64, true}, CoreCase{false, 64, false}),
                         CoreName);

// ---------------------------------------------------------------- the layer

TEST_P(LayerTest, PrefillMatchesReferenceIncludingState) {
  const int n = 150;
  const std::vector<float> x = Input(n, 1);
  LinearAttention lin(config_);
  auto pool = MakePool(2);
  const std::vector<float> got = Alone(&lin, pool.get(), x, 0, n, 1);
  ref::RefLinearState st = ref::RefLinearZeroState(config_);
  const std::vector<double> want = ref::RefLinearForward(config_, w(), x.data(), n, &st);
  const double scale = Scale(want);
  EXPECT_LE(MaxAbsDiff(got, want), 1e-4 * scale) << "tol 1e-4 * " << scale;
  const float* s = pool->State(1, state_layer_);
  const std::vector<float> state(s, s + st.s.size());
  EXPECT_LE(MaxAbsDiff(state, st.s), 1e-4 * MaxAbs(st.s)) << "recurrent state, tol 1e-4 rel";
  if (!st.conv.empty()) {
    const float* cv = pool->Conv(1, state_layer_);
    const std::vector<float> conv(cv, cv + st.conv.size());
    EXPECT_LE(MaxAbsDiff(conv, st.conv), 1e-5 * MaxAbs(st.conv)) << "conv state, tol 1e-5 rel";
  }
}

TEST_P(LayerTest, SplitPrefillThenDecodesEqualsOneLongPrefill) {
  const std::vector<int> parts = {70, 50, 29, 1, 1, 1, 1, 1, 1};
  const int n = 155;
  const std::vector<float> x = Input(n, 2);
  LinearAttention lin(config_);
  auto pool = MakePool(2);
  std::vector<float> split;
  int at = 0;
  for (int len : parts) {
    const std::vector<float> y = Alone(&lin, pool.get(), x, at, len, 0);
    split.insert(split.end(), y.begin(), y.end());
    at += len;
  }
  ASSERT_EQ(at, n);
  const std::vector<float> whole = Alone(&lin, pool.get(), x, 0, n, 1);
  const std::vector<double> want = Reference(x, n);
  const double scale = Scale(want);
  EXPECT_LE(MaxAbsDiff(split, whole), 2e-5 * scale) << "split vs whole, tol 2e-5 * " << scale;
  EXPECT_LE(MaxAbsDiff(split, want), 1e-4 * scale) << "split vs reference, tol 1e-4 * " << scale;
}

TEST_P(LayerTest, MixedBatchEqualsSeqsAlone) {
  const int h = config_.hidden;
  const std::vector<float> xa = Input(41, 3), xb = Input(60, 4), xc = Input(55, 5);
  LinearAttention lin(config_);
  auto batch_pool = MakePool(3), alone_pool = MakePool(3);
  for (StatePool* pool : {batch_pool.get(), alone_pool.get()}) {
    Alone(&lin, pool, xa, 0, 40, 0);  // seq a: 40 tokens in, decodes next
    Alone(&lin, pool, xc, 0, 30, 2);  // seq c: 30 tokens in, prefills 25 more
  }
  // Packed rows: b's prefill (fresh, slot 1), a's decode, c's continued prefill.
  std::vector<float> x(xb);
  x.insert(x.end(), xa.begin() + 40 * h, xa.end());
  x.insert(x.end(), xc.begin() + 30 * h, xc.end());
  const std::vector<SeqRows> seqs = {SeqRows{.row = 0, .n = 60, .start_pos = 0, .state_slot = 1},
                                     SeqRows{.row = 60, .n = 1, .start_pos = 40, .state_slot = 0},
                                     SeqRows{.row = 61, .n = 25, .start_pos = 30, .state_slot = 2}};
  const std::vector<float> batched = Step(&lin, batch_pool.get(), x.data(), seqs);
  std::vector<float> alone = Alone(&lin, alone_pool.get(), xb, 0, 60, 1);
  for (const std::vector<float>& y : {Alone(&lin, alone_pool.get(), xa, 40, 1, 0),
                                      Alone(&lin, alone_pool.get(), xc, 30, 25, 2)}) {
    alone.insert(alone.end(), y.begin(), y.end());
  }
  const double scale = std::max(1.0, MaxAbs(alone));
  EXPECT_LE(MaxAbsDiff(batched, alone), 2e-5 * scale) << "tol 2e-5 * " << scale;
  for (int slot = 0; slot < 3; ++slot) {
    const float* a = batch_pool->State(slot, state_layer_);
    const float* b = alone_pool->State(slot, state_layer_);
    const size_t n = batch_pool->options().state_floats;
    const std::vector<float> sa(a, a + n), sb(b, b + n);
    EXPECT_LE(MaxAbsDiff(sa, sb), 2e-5 * MaxAbs(sb)) << "slot " << slot;
  }
  // And the batch against the reference for the fresh seq b.
  const std::vector<double> want_b = Reference(xb, 60);
  const std::vector<float> got_b(batched.begin(), batched.begin() + 60 * h);
  EXPECT_LE(MaxAbsDiff(got_b, want_b), 1e-4 * Scale(want_b)) << "tol 1e-4 rel";
}

TEST_P(LayerTest, StaleSlotIsResetAtPositionZero) {
  const std::vector<float> x = Input(50, 6);
  LinearAttention lin(config_);
  auto fresh = MakePool(1), stale = MakePool(1);
  // A previous owner's leftovers, in every layer of the slot.
  auto spoil = [&] {
    for (int l = 0; l < config_.linear_layers(); ++l) {
      float* s = stale->State(0, l);
      std::fill(s, s + stale->options().state_floats, std::numeric_limits<float>::quiet_NaN());
      if (stale->options().conv_floats > 0) {
        float* cv = stale->Conv(0, l);
        std::fill(cv, cv + stale->options().conv_floats, 1e6f);
      }
    }
  };
  // A one-token start (a prompt of one token) and a prefill start.
  for (int n : {1, 50}) {
    spoil();
    fresh->Zero(0);
    const std::vector<float> want = Alone(&lin, fresh.get(), x, 0, n, 0);
    const std::vector<float> got = Alone(&lin, stale.get(), x, 0, n, 0);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "n " << n << " element " << i << " (must match exactly)";
    }
  }
}

TEST_P(LayerTest, RecurrentPrefillModeEqualsChunked) {
  const int n = 150;
  const std::vector<float> x = Input(n, 7);
  LinearAttention chunked(config_);
  LinearAttention recurrent(config_, {.chunk = 64, .prefill = PrefillMode::kRecurrent});
  auto p1 = MakePool(1), p2 = MakePool(1);
  const std::vector<float> a = Alone(&chunked, p1.get(), x, 0, n, 0);
  const std::vector<float> b = Alone(&recurrent, p2.get(), x, 0, n, 0);
  const std::vector<double> want = Reference(x, n);
  const double scale = Scale(want);
  EXPECT_LE(MaxAbsDiff(a, b), 2e-5 * scale) << "tol 2e-5 * " << scale;
  EXPECT_LE(MaxAbsDiff(b, want), 1e-4 * scale) << "tol 1e-4 * " << scale;
}

TEST_P(LayerTest, DecodeContinuesFromSlotLikeTheReference) {
  const int prefill = 100, decodes = 12, n = prefill + decodes;
  const std::vector<float> x = Input(n, 8);
  LinearAttention lin(config_);
  auto pool = MakePool(1);
  const std::vector<double> want = Reference(x, n);
  const double scale = Scale(want);
  Alone(&lin, pool.get(), x, 0, prefill, 0);
  const int h = config_.hidden;
  for (int pos = prefill; pos < n; ++pos) {
    const std::vector<float> got = Alone(&lin, pool.get(), x, pos, 1, 0);
    const std::vector<double> at(want.begin() + static_cast<size_t>(pos) * h,
                                 want.begin() + static_cast<size_t>(pos + 1) * h);
    EXPECT_LE(MaxAbsDiff(got, at), 1e-4 * scale) << "position " << pos << ", tol 1e-4 * " << scale;
  }
}

TEST_P(LayerTest, RecordsOneSpanPerStageAndForm) {
  const std::vector<float> x = Input(20, 9);
  LinearAttention lin(config_);
  auto pool = MakePool(2);
  Alone(&lin, pool.get(), x, 0, 10, 0);
  SpanRecorder rec(0, std::chrono::steady_clock::now());
  rec.Reset(TraceLevel::kFull);
  std::vector<float> rows(x.begin() + 10 * config_.hidden, x.end());   // seq 0 decodes
  rows.insert(rows.end(), x.begin(), x.begin() + 8 * config_.hidden);  // seq 1 prefills 8
  Step(&lin, pool.get(), rows.data(),
       {SeqRows{.row = 0, .n = 1, .start_pos = 10, .state_slot = 0},
        SeqRows{.row = 1, .n = 8, .start_pos = 0, .state_slot = 1}},
       &rec);
  const bool kda = config_.linear_kind == AttentionKind::kKda;
  std::multiset<std::string> names;
  for (const telemetry::Span& s : rec.spans()) {
    names.insert(s.name);
    EXPECT_EQ(s.layer, layer_) << s.name;
    EXPECT_GT(s.flops, 0) << s.name;
    EXPECT_GT(s.bytes, 0) << s.name;
    const int64_t want_tokens = s.name.ends_with("_chunk")       ? 8
                                : s.name.ends_with("_recurrent") ? 1
                                                                 : 9;
    EXPECT_EQ(s.tokens, want_tokens) << s.name;
  }
  std::multiset<std::string> want = {"linear_proj", "linear_out"};
  want.insert(kda ? "kda_chunk" : "gla_chunk");
  want.insert(kda ? "kda_recurrent" : "gla_recurrent");
  if (kda) want.insert("short_conv");
  EXPECT_EQ(names, want);
}

INSTANTIATE_TEST_SUITE_P(Presets, LayerTest, ::testing::Values("tiny-hybrid", "tiny-gla"),
                         [](const auto& info) {
                           return info.param == "tiny-hybrid" ? std::string("TinyHybrid")
                                                              : std::string("TinyGla");
                         });

}  // namespace
}  // namespace sy::engine
