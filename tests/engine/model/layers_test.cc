#include "engine/model/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tests/engine/model/reference_model.h"

namespace sy::engine {
namespace {

std::vector<float> Random(uint64_t seed, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  FillTensor(seed, "test", scale, 0.0f, v.data(), n);
  return v;
}

void ExpectNear(const float* got, const std::vector<float>& want, float tol) {
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(LayersTest, RmsNormMatchesReferencePerRowAndInPlace) {
  const int rows = 3, dim = 40;
  const std::vector<float> x = Random(1, rows * dim, 3.0f), g = Random(2, dim);
  std::vector<float> out(x.size());
  RmsNorm(x.data(), g.data(), rows, dim, 1e-6f, out.data());
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + r * dim, x.begin() + (r + 1) * dim);
    ExpectNear(&out[r * dim], ref::RmsNorm(row, g, 1e-6f), 1e-5f);
  }
  std::vector<float> inplace = x;
  RmsNorm(inplace.data(), g.data(), rows, dim, 1e-6f, inplace.data());
  EXPECT_EQ(inplace, out);
}

TEST(LayersTest, RopeMatchesReferenceAndKeepsNorm) {
  const int d = 16, heads = 3;
  RopeTable rope(512, d, 10000.0f);
  for (int pos : {0, 1, 7, 511}) {
    std::vector<float> x = Random(pos + 10, heads * d);
    const std::vector<float> orig = x;
    rope.Apply(x.data(), heads, pos);
    for (int h = 0; h < heads; ++h) {
      std::vector<float> head(orig.begin() + h * d, orig.begin() + (h + 1) * d);
      ExpectNear(&x[h * d], ref::Rope(head, pos, 10000.0f), 1e-5f);
      double n0 = 0, n1 = 0;
      for (int i = 0; i < d; ++i) {
        n0 += head[i] * head[i];
        n1 += x[h * d + i] * x[h * d + i];
      }
      EXPECT_NEAR(n0, n1, 1e-4);
    }
    if (pos == 0) {
      EXPECT_EQ(x, orig);
    }
  }
}

TEST(LayersTest, SwigluMatchesReference) {
  SwigluWeights w;
  w.in = 24;
  w.inter = 40;
  w.gate_up = Random(3, 24 * 80, 0.3f);
  w.down = Random(4, 40 * 24, 0.3f);
  const int rows = 4;
  const std::vector<float> x = Random(5, rows * 24);
  std::vector<float> scratch(rows * 80), out(rows * 24);
  SwigluFfn(w, x.data(), rows, scratch.data(), out.data());
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + r * 24, x.begin() + (r + 1) * 24);
    ExpectNear(&out[r * 24], ref::Swiglu(w, row), 1e-5f);
  }
}

TEST(LayersTest, SoftmaxMatchesReferenceOnLargeValues) {
  std::vector<float> x = {1000.0f, 999.0f, -5.0f, 998.5f};
  const std::vector<float> want = ref::Softmax(x);
  Softmax(x.data(), static_cast<int>(x.size()));
  ExpectNear(x.data(), want, 1e-6f);
}

TEST(LayersTest, GreedySamplingIsArgmaxWithLowestIdOnTies) {
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  std::vector<float> scratch(4);
  EXPECT_EQ(SampleToken(logits.data(), 4, 0.0f, 99, scratch.data()), 1);
}

TEST(LayersTest, TemperatureSamplingIsDeterministicPerSeedAndFollowsTheDistribution) {
  const std::vector<float> logits = {0.0f, std::log(3.0f), -100.0f};  // p ~ 0.25, 0.75, 0
  std::vector<float> scratch(3);
  EXPECT_EQ(SampleToken(logits.data(), 3, 1.0f, 42, scratch.data()),
            SampleToken(logits.data(), 3, 1.0f, 42, scratch.data()));
  std::map<int, int> hist;
  const int n = 4000;
  for (int s = 0; s < n; ++s) hist[SampleToken(logits.data(), 3, 1.0f, s, scratch.data())]++;
  EXPECT_EQ(hist[2], 0);
  EXPECT_NEAR(hist[1] / static_cast<double>(n), 0.75, 0.04);
  // A very low temperature is greedy in effect.
  for (int s = 0; s < 50; ++s)
    EXPECT_EQ(SampleToken(logits.data(), 3, 1e-3f, s, scratch.data()), 1);
}

}  // namespace
}  // namespace sy::engine
