#include "engine/model/layers.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sy::engine {

void RmsNorm(const float* x, const float* gain, int rows, int dim, float eps, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    float* o = out + static_cast<size_t>(r) * dim;
    const float ss = Dot(xr, xr, dim);
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = xr[i] * inv * gain[i];
  }
}

RopeTable::RopeTable(int max_seq, int head_dim, float theta, bool interleaved)
    : head_dim_(head_dim), interleaved_(interleaved), half_(head_dim / 2) {
  cos_.resize(static_cast<size_t>(max_seq) * half_);
  sin_.resize(cos_.size());
  for (int p = 0; p < max_seq; ++p) {
    for (int i = 0; i < half_; ++i) {
      // Angles in double so that long positions do not lose the low bits.
      const double freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      const double a = p * freq;
      cos_[static_cast<size_t>(p) * half_ + i] = static_cast<float>(std::cos(a));
      sin_[static_cast<size_t>(p) * half_ + i] = static_cast<float>(std::sin(a));
    }
  }
}

void RopeTable::Apply(float* x, int n_heads, int pos) const {
  assert(pos >= 0 && static_cast<size_t>(pos) * half_ < cos_.size());
  const float* c = &cos_[static_cast<size_t>(pos) * half_];
  const float* s = &sin_[static_cast<size_t>(pos) * half_];
  if (interleaved_) {
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<size_t>(h) * head_dim_;
      for (int i = 0; i < half_; ++i) {
        const float x1 = v[2 * i], x2 = v[2 * i + 1];
        v[2 * i] = x1 * c[i] - x2 * s[i];
        v[2 * i + 1] = x2 * c[i] + x1 * s[i];
      }
    }
    return;
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim_;
    for (int i = 0; i < half_; ++i) {
      const float x1 = v[i], x2 = v[i + half_];
      v[i] = x1 * c[i] - x2 * s[i];
      v[i + half_] = x2 * c[i] + x1 * s[i];
    }
  }
}

void SiluMul(float* gate_up, int rows, int inter) {
  for (int r = 0; r < rows; ++r) {
    float* g = gate_up + static_cast<size_t>(r) * 2 * inter;
    const float* u = g + inter;
    for (int i = 0; i < inter; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void SwigluFfn(const SwigluWeights& w, const float* x, int rows, float* scratch, float* out,
               bool accumulate) {
  if (rows == 0) return;
  const int h = w.in, inter = w.inter;
  Gemm(x, w.gate_up.data(), scratch, rows, h, 2 * inter);
  SiluMul(scratch, rows, inter);
  // The activations sit in the first I columns of rows of stride 2I.
  GemmLda(scratch, 2 * inter, w.down.data(), out, rows, inter, h, accumulate);
}

void Softmax(float* x, int n) {
  if (n <= 0) return;
  const float mx = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

int32_t SampleToken(const float* logits, int n, float temperature, uint64_t seed, float* scratch) {
  if (temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  }
  const float inv_t = 1.0f / temperature;
  for (int i = 0; i < n; ++i) scratch[i] = logits[i] * inv_t;
  Softmax(scratch, n);
  // 53 random bits -> u in [0, 1).
  const double u = static_cast<double>(SplitMix64(seed) >> 11) * 0x1.0p-53;
  double acc = 0.0;
  for (int i = 0; i < n; ++i) {
    acc += scratch[i];
    if (u < acc) return i;
  }
  // Rounding left the total just under 1: take the last token with mass.
  for (int i = n - 1; i >= 0; --i) {
    if (scratch[i] > 0.0f) return i;
  }
  return n - 1;
}

}  // namespace sy::engine
