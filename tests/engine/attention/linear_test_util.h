// File: tests/engine/attention/linear_test_util.h
//
// Shared by the linear-attention layer tests: random inputs, error measures,
// and the LayerTest fixture (one linear layer of a hybrid preset, its
// weights, a StatePool, and the double-precision reference).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/attention/linear_attention.h"
#include "tests/engine/attention/reference_linear.h"

namespace sy::engine {

inline std::vector<float> Uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <typename A, typename B>
inline double MaxAbsDiff(const A& a, const B& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

template <typename A>
inline double MaxAbs(const A& a) {
  double m = 0.0;
  for (const auto& x : a) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

class LayerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Result<ModelConfig> c = PresetConfig(GetParam());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = c.value();
    weights_ = BuildWeights(config_, 11, {});
    for (int l = 0; l < config_.layers; ++l) {
      if (!config_.is_full_attention(l)) {
        layer_ = l;
        break;
      }
    }
    ASSERT_GE(layer_, 0);
    state_layer_ = config_.state_layer(layer_);
  }

  const LinearAttnWeights& w() const { return weights_.layers[layer_].linear; }

  std::unique_ptr<StatePool> MakePool(int slots) const {
    StatePoolOptions o;
    o.slots = slots;
    o.layers = config_.linear_layers();
    o.state_floats = config_.state_floats_per_layer() - config_.conv_state_floats();
    o.conv_floats = config_.conv_state_floats();
    return std::make_unique<StatePool>(o);
  }

  std::vector<float> Input(int tokens, uint32_t seed) const {
    return Uniform(static_cast<size_t>(tokens) * config_.hidden, seed, -1.5f, 1.5f);
  }

  // One step over `seqs` with the rows of x; returns what the layer added.
  std::vector<float> Step(LinearAttention* lin, StatePool* pool, const float* x,
                          const std::vector<SeqRows>& seqs, SpanRecorder* rec = nullptr) const {
    int tokens = 0;
    for (const SeqRows& s : seqs) tokens = std::max(tokens, s.row + s.n);
    std::vector<float> out(static_cast<size_t>(tokens) * config_.hidden, 0.0f);
    lin->Forward(w(), state_layer_, layer_, x, tokens, seqs, pool, out.data(), rec);
    return out;
  }

  // One seq alone in slot `slot`: tokens [from, from + n) of x.
  std::vector<float> Alone(LinearAttention* lin, StatePool* pool, const std::vector<float>& x,
                           int from, int n, int slot) const {
    return Step(lin, pool, x.data() + static_cast<size_t>(from) * config_.hidden,
                {SeqRows{.row = 0, .n = n, .start_pos = from, .state_slot = slot}});
  }

  std::vector<double> Reference(const std::vector<float>& x, int tokens) const {
    ref::RefLinearState st = ref::RefLinearZeroState(config_);
    return ref::RefLinearForward(config_, w(), x.data(), tokens, &st);
  }

  double Scale(const std::vector<double>& ref) const { return std::max(1.0, MaxAbs(ref)); }

  ModelConfig config_;
  ModelWeights weights_;
  int layer_ = -1, state_layer_ = -1;
};

}  // namespace sy::engine
