#include "tests/engine/attention/reference_mla.h"

#include <cmath>

#include "tests/engine/model/reference_model.h"

namespace sy::engine::ref {

std::vector<float> RopeDirect(const std::vector<float>& x, int pos, float theta, bool interleaved) {
  const int d = static_cast<int>(x.size()), half = d / 2;
  std::vector<float> y(d);
  for (int i = 0; i < half; ++i) {
    const double a = pos * std::pow(static_cast<double>(theta), -2.0 * i / d);
    const int i1 = interleaved ? 2 * i : i;
    const int i2 = interleaved ? 2 * i + 1 : i + half;
    y[i1] = static_cast<float>(x[i1] * std::cos(a) - x[i2] * std::sin(a));
    y[i2] = static_cast<float>(x[i2] * std::cos(a) + x[i1] * std::sin(a));
  }
  return y;
}

MlaResult Mla(const ModelConfig& c, const MlaWeights& w, const std::vector<std::vector<float>>& x) {
  const int hid = c.hidden, heads = c.heads, n = c.qk_nope_head_dim, p = c.qk_rope_head_dim;
  const int v = c.v_head_dim, r = c.kv_lora_rank, qk = n + p, kvb = heads * (n + v);
  const int tokens = static_cast<int>(x.size());
  // Per token and head: q_nope, q_rope (roped), k_nope, v; per token: k_rope.
  std::vector<std::vector<std::vector<float>>> qn(tokens), qr(tokens), kn(tokens), vv(tokens);
  std::vector<std::vector<float>> kr(tokens), gate(tokens);
  MlaResult res;
  for (int t = 0; t < tokens; ++t) {
    std::vector<float> q;
    if (c.q_lora_rank > 0) {
      q = MatVec(RmsNorm(MatVec(x[t], w.q_a, hid, c.q_lora_rank), w.q_a_norm, c.rms_eps), w.q_b,
                 c.q_lora_rank, heads * qk);
    } else {
      q = MatVec(x[t], w.q_b, hid, heads * qk);
    }
    const std::vector<float> kv = MatVec(x[t], w.kv_a, hid, r + p);
    const std::vector<float> ckv =
        RmsNorm(std::vector<float>(kv.begin(), kv.begin() + r), w.kv_a_norm, c.rms_eps);
    kr[t] = RopeDirect(std::vector<float>(kv.begin() + r, kv.end()), t, c.rope_theta,
                       c.rope_interleave);
    res.latent.push_back(ckv);
    res.latent.back().insert(res.latent.back().end(), kr[t].begin(), kr[t].end());
    for (int h = 0; h < heads; ++h) {
      const auto qh = q.begin() + h * qk;
      qn[t].emplace_back(qh, qh + n);
      qr[t].push_back(
          RopeDirect(std::vector<float>(qh + n, qh + qk), t, c.rope_theta, c.rope_interleave));
      std::vector<float> k_nope(n), val(v);
      for (int i = 0; i < n; ++i) {
        double acc = 0.0;
        for (int j = 0; j < r; ++j)
          acc += static_cast<double>(ckv[j]) * w.kv_b[j * kvb + h * (n + v) + i];
        k_nope[i] = static_cast<float>(acc);
      }
      for (int i = 0; i < v; ++i) {
        double acc = 0.0;
        for (int j = 0; j < r; ++j) {
          acc += static_cast<double>(ckv[j]) * w.kv_b[j * kvb + h * (n + v) + n + i];
        }
        val[i] = static_cast<float>(acc);
      }
      kn[t].push_back(std::move(k_nope));
      vv[t].push_back(std::move(val));
    }
    if (c.mla_gate) gate[t] = MatVec(x[t], w.gate, hid, heads);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(qk));
  for (int t = 0; t < tokens; ++t) {
    std::vector<float> o(static_cast<size_t>(heads) * v);
    for (int h = 0; h < heads; ++h) {
      std::vector<float> score(t + 1);
      for (int j = 0; j <= t; ++j) {
        double acc = 0.0;
        for (int i = 0; i < n; ++i) acc += static_cast<double>(qn[t][h][i]) * kn[j][h][i];
        for (int i = 0; i < p; ++i) acc += static_cast<double>(qr[t][h][i]) * kr[j][i];
        score[j] = static_cast<float>(acc * scale);
      }
      const std::vector<float> prob = Softmax(score);
      const double g = c.mla_gate ? 1.0 / (1.0 + std::exp(-static_cast<double>(gate[t][h]))) : 1.0;
      for (int i = 0; i < v; ++i) {
        double acc = 0.0;
        for (int j = 0; j <= t; ++j) acc += static_cast<double>(prob[j]) * vv[j][h][i];
        o[static_cast<size_t>(h) * v + i] = static_cast<float>(acc * g);
      }
    }
    res.out.push_back(MatVec(o, w.o, heads * v, hid));
  }
  return res;
}

}  // namespace sy::engine::ref
