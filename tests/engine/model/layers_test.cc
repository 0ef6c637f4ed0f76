#include "engine/model/layers.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Interleaved RoPE straight from its definition: pairs (2i, 2i+1) rotated by
// pos * theta^(-2i/d), angles in double.
std::vector<float> InterleavedRope(const std::vector<float>& x, int pos, float theta) {
  const int d = static_cast<int>(x.size());
  std::vector<float> y(d);
  for (int i = 0; i < d / 2; ++i) {
    const double a = pos * std::pow(static_cast<double>(theta), -2.0 * i / d);
    y[2 * i] = static_cast<float>(x[2 * i] * std::cos(a) - x[2 * i + 1] * std::sin(a));
    y[2 * i + 1] = static_cast<float>(x[2 * i + 1] * std::cos(a) + x[2 * i] * std::sin(a));
  }
  return y;
}

TEST(LayersTest, InterleavedRopeMatchesDirectFormula) {
  const int d = 32, heads = 3;
  const float theta = 50000.0f;
  RopeTable rope(600, d, theta, /*interleaved=*/true);
  EXPECT_TRUE(rope.interleaved());
  for (int pos : {0, 1, 9, 599}) {
    std::vector<float> x = Random(pos + 40, heads * d);
    const std::vector<float> orig = x;
    rope.Apply(x.data(), heads, pos);
    for (int h = 0; h < heads; ++h) {
      std::vector<float> head(orig.begin() + h * d, orig.begin() + (h + 1) * d);
      ExpectNear(&x[h * d], InterleavedRope(head, pos, theta), 1e-5f);
    }
    if (pos == 0) {
      EXPECT_EQ(x, orig);
    }
  }
}

TEST(LayersTest, InterleavedAndRotateHalfDifferButKeepDotProductsRelative) {
  // Both conventions are rotations: q.k depends only on the position gap, so
  // (q at 7, k at 3) scores like (q at 14, k at 10) in either convention; but
  // they rotate different pairs, so the rotated vectors differ.
  const int d = 16;
  RopeTable half(64, d, 10000.0f), inter(64, d, 10000.0f, true);
  EXPECT_FALSE(half.interleaved());
  const std::vector<float> q = Random(70, d), k = Random(71, d);
  for (const RopeTable* r : {&half, &inter}) {
    std::vector<float> q7 = q, k3 = k, q14 = q, k10 = k;
    r->Apply(q7.data(), 1, 7);
    r->Apply(k3.data(), 1, 3);
    r->Apply(q14.data(), 1, 14);
    r->Apply(k10.data(), 1, 10);
    EXPECT_NEAR(Dot(q7.data(), k3.data(), d), Dot(q14.data(), k10.data(), d), 1e-4f);
  }
  std::vector<float> a = q, b = q;
  half.Apply(a.data(), 1, 5);
  inter.Apply(b.data(), 1, 5);
  float diff = 0.0f;
  for (int i = 0; i < d; ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  EXPECT_GT(diff, 1e-2f);
  // Rotate-half is still what ref::Rope says (the default is unchanged).
  ExpectNear(a.data(), ref::Rope(q, 5, 10000.0f), 1e-5f);
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
