#include "tests/engine/model/reference_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sy::engine::ref {

std::vector<float> MatVec(const std::vector<float>& x, const std::vector<float>& w, int in,
                          int out) {
  std::vector<float> y(out);
  for (int o = 0; o < out; ++o) {
    double acc = 0.0;
    for (int i = 0; i < in; ++i)
      acc += static_cast<double>(x[i]) * w[static_cast<size_t>(i) * out + o];
    y[o] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> RmsNorm(const std::vector<float>& x, const std::vector<float>& gain, float eps) {
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * inv * gain[i]);
  return y;
}

std::vector<float> Rope(const std::vector<float>& x, int pos, float theta) {
  const int d = static_cast<int>(x.size()), half = d / 2;
  std::vector<float> y(d);
  for (int i = 0; i < half; ++i) {
    const double a = pos * std::pow(static_cast<double>(theta), -2.0 * i / d);
    y[i] = static_cast<float>(x[i] * std::cos(a) - x[i + half] * std::sin(a));
    y[i + half] = static_cast<float>(x[i + half] * std::cos(a) + x[i] * std::sin(a));
  }
  return y;
}

std::vector<float> Softmax(const std::vector<float>& x) {
  const double mx = *std::max_element(x.begin(), x.end());
  std::vector<double> e(x.size());
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += e[i] = std::exp(x[i] - mx);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(e[i] / sum);
  return y;
}

std::vector<float> Swiglu(const SwigluWeights& w, const std::vector<float>& x) {
  const int h = w.in, inter = w.inter;
  std::vector<float> gu = MatVec(x, w.gate_up, h, 2 * inter);
  std::vector<float> act(inter);
  for (int i = 0; i < inter; ++i) {
    const double g = gu[i];
    act[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * gu[inter + i]);
  }
  return MatVec(act, w.down, inter, h);
}

Routing Route(const std::vector<float>& logits, int top_k, bool renormalize) {
  const std::vector<float> p = Softmax(logits);
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  Routing r;
  double sum = 0.0;
  for (int k = 0; k < top_k; ++k) {
    r.ids.push_back(order[k]);
    r.weights.push_back(p[order[k]]);
    sum += p[order[k]];
  }
  if (renormalize) {
    for (float& w : r.weights) w = static_cast<float>(w / sum);
  }
  return r;
}

std::vector<float> Moe(const ModelConfig& c, const LayerWeights& w, const std::vector<float>& x) {
  const Routing r = Route(MatVec(x, w.router, c.hidden, c.experts), c.top_k, c.norm_topk_prob);
  std::vector<double> acc(c.hidden, 0.0);
  for (int k = 0; k < c.top_k; ++k) {
    const std::vector<float> y = Swiglu(w.experts[r.ids[k]], x);
    for (int i = 0; i < c.hidden; ++i) acc[i] += static_cast<double>(r.weights[k]) * y[i];
  }
  if (w.shared.present()) {
    const std::vector<float> s = Swiglu(w.shared, x);
    for (int i = 0; i < c.hidden; ++i) acc[i] += s[i];
  }
  return std::vector<float>(acc.begin(), acc.end());
}

std::vector<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w,
                                        const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size()), h = c.hidden, d = c.head_dim;
  const int qc = c.heads * d, kvc = c.kv_heads * d;
  std::vector<std::vector<float>> x(n);
  for (int t = 0; t < n; ++t) {
    x[t].assign(w.embed.begin() + static_cast<size_t>(tokens[t]) * h,
                w.embed.begin() + static_cast<size_t>(tokens[t] + 1) * h);
  }
  for (int l = 0; l < c.layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    // Contiguous K/V cache of this layer: [position][kv_heads * head_dim].
    std::vector<std::vector<float>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const std::vector<float> qkv =
          MatVec(RmsNorm(x[t], lw.attn_norm, c.rms_eps), lw.wqkv, h, qc + 2 * kvc);
      for (int hd = 0; hd < c.heads; ++hd) {
        std::vector<float> head(qkv.begin() + hd * d, qkv.begin() + (hd + 1) * d);
        head = Rope(head, t, c.rope_theta);
        q[t].insert(q[t].end(), head.begin(), head.end());
      }
      for (int hd = 0; hd < c.kv_heads; ++hd) {
        std::vector<float> head(qkv.begin() + qc + hd * d, qkv.begin() + qc + (hd + 1) * d);
        head = Rope(head, t, c.rope_theta);
        k[t].insert(k[t].end(), head.begin(), head.end());
      }
      v[t].assign(qkv.begin() + qc + kvc, qkv.end());
    }
    for (int t = 0; t < n; ++t) {
      std::vector<float> attn(qc, 0.0f);
      for (int hd = 0; hd < c.heads; ++hd) {
        const int kvh = hd / (c.heads / c.kv_heads);
        std::vector<float> s(t + 1);
        for (int j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int i = 0; i < d; ++i)
            dot += static_cast<double>(q[t][hd * d + i]) * k[j][kvh * d + i];
          s[j] = static_cast<float>(dot / std::sqrt(static_cast<double>(d)));
        }
        const std::vector<float> p = Softmax(s);
        for (int i = 0; i < d; ++i) {
          double acc = 0.0;
          for (int j = 0; j <= t; ++j) acc += static_cast<double>(p[j]) * v[j][kvh * d + i];
          attn[hd * d + i] = static_cast<float>(acc);
        }
      }
      const std::vector<float> o = MatVec(attn, lw.wo, qc, h);
      for (int i = 0; i < h; ++i) x[t][i] += o[i];
      const std::vector<float> m = Moe(c, lw, RmsNorm(x[t], lw.ffn_norm, c.rms_eps));
      for (int i = 0; i < h; ++i) x[t][i] += m[i];
    }
  }
  std::vector<std::vector<float>> logits(n);
  for (int t = 0; t < n; ++t) {
    logits[t] = MatVec(RmsNorm(x[t], w.final_norm, c.rms_eps), w.lm_head, h, c.vocab);
  }
  return logits;
}

ModelWeights FullWeights(const ModelConfig& c, uint64_t seed) {
  std::vector<int> all(c.experts);
  std::iota(all.begin(), all.end(), 0);
  return BuildWeights(c, seed, all);
}

}  // namespace sy::engine::ref
