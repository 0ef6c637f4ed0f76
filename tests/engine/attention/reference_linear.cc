#include "tests/engine/attention/reference_linear.h"

#include <cmath>

namespace sy::engine::ref {

namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// y = x W for one row, W row-major [in x out].
std::vector<double> RowTimes(const float* x, const std::vector<float>& w, int in, int out) {
  std::vector<double> y(out, 0.0);
  for (int i = 0; i < in; ++i) {
    for (int j = 0; j < out; ++j) y[j] += static_cast<double>(x[i]) * w[i * out + j];
  }
  return y;
}

// c = a b for d x d matrices.
std::vector<double> MatMul(const std::vector<double>& a, const std::vector<double>& b, int d) {
  std::vector<double> c(static_cast<size_t>(d) * d, 0.0);
  for (int i = 0; i < d; ++i) {
    for (int l = 0; l < d; ++l) {
      for (int j = 0; j < d; ++j) c[i * d + j] += a[i * d + l] * b[l * d + j];
    }
  }
  return c;
}

void Output(int d, const double* q, const std::vector<double>& s, double* o) {
  for (int j = 0; j < d; ++j) {
    o[j] = 0.0;
    for (int c = 0; c < d; ++c) o[j] += s[c * d + j] * q[c];
  }
}

}  // namespace

void KdaStep(int d, const double* q, const double* k, const double* v, const double* g, double beta,
             std::vector<double>* s, double* o) {
  std::vector<double> m(static_cast<size_t>(d) * d), decay(static_cast<size_t>(d) * d, 0.0);
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) m[i * d + j] = (i == j ? 1.0 : 0.0) - beta * k[i] * k[j];
    decay[i * d + i] = std::exp(g[i]);
  }
  std::vector<double> next = MatMul(m, MatMul(decay, *s, d), d);
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) next[i * d + j] += beta * k[i] * v[j];
  }
  *s = std::move(next);
  Output(d, q, *s, o);
}

void GlaStep(int d, const double* q, const double* k, const double* v, const double* g,
             std::vector<double>* s, double* o) {
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) (*s)[i * d + j] = std::exp(g[i]) * (*s)[i * d + j] + k[i] * v[j];
  }
  Output(d, q, *s, o);
}

RefLinearState RefLinearZeroState(const ModelConfig& c) {
  const size_t dd = static_cast<size_t>(c.heads) * c.linear_head_dim;
  RefLinearState st;
  st.s.assign(dd * c.linear_head_dim, 0.0);
  if (c.linear_kind == AttentionKind::kKda && c.conv_kernel > 1) {
    st.conv.assign((c.conv_kernel - 1) * 3 * dd, 0.0);
  }
  return st;
}

std::vector<double> RefLinearForward(const ModelConfig& c, const LinearAttnWeights& w,
                                     const float* x, int tokens, RefLinearState* st) {
  const bool kda = c.linear_kind == AttentionKind::kKda;
  const int h = c.hidden, nh = c.heads, d = c.linear_head_dim, dd = nh * d;
  const int kw = kda ? c.conv_kernel : 0;
  std::vector<double> y(static_cast<size_t>(tokens) * h, 0.0);
  for (int t = 0; t < tokens; ++t) {
    const float* xt = x + static_cast<size_t>(t) * h;
    // Pre-conv q | k | v, 3D channels.
    std::vector<double> u;
    for (const std::vector<float>* m : {&w.q, &w.k, &w.v}) {
      std::vector<double> p = RowTimes(xt, *m, h, dd);
      u.insert(u.end(), p.begin(), p.end());
    }
    std::vector<double> qkv = u;
    if (kda) {
      // Window: the K-1 stored inputs (oldest first), then this token.
      const int ch = 3 * dd;
      for (int cc = 0; cc < ch; ++cc) {
        double acc = 0.0;
        for (int i = 0; i < kw; ++i) {
          const double in = i == kw - 1 ? u[cc] : st->conv[static_cast<size_t>(i) * ch + cc];
          acc += static_cast<double>(w.conv[static_cast<size_t>(cc) * kw + i]) * in;
        }
        qkv[cc] = acc * Sigmoid(acc);
      }
      if (kw > 1) {
        st->conv.erase(st->conv.begin(), st->conv.begin() + ch);
        st->conv.insert(st->conv.end(), u.begin(), u.end());
      }
    }
    const std::vector<double> f = RowTimes(xt, w.f, h, dd);
    const std::vector<double> og = RowTimes(xt, w.g, h, dd);
    const std::vector<double> bp = kda ? RowTimes(xt, w.b, h, nh) : std::vector<double>();
    std::vector<double> gated(dd);
    for (int hd = 0; hd < nh; ++hd) {
      double* q = &qkv[hd * d];
      double* k = &qkv[dd + hd * d];
      const double* v = &qkv[2 * dd + hd * d];
      if (kda) {
        double qq = 0.0, kk = 0.0;
        for (int i = 0; i < d; ++i) {
          qq += q[i] * q[i];
          kk += k[i] * k[i];
        }
        for (int i = 0; i < d; ++i) {
          q[i] /= std::sqrt(qq + 1e-6);
          k[i] /= std::sqrt(kk + 1e-6);
        }
      }
      for (int i = 0; i < d; ++i) q[i] /= std::sqrt(static_cast<double>(d));
      const double a = std::exp(static_cast<double>(w.a_log[hd]));
      std::vector<double> g(d);
      for (int i = 0; i < d; ++i) {
        const double z = f[hd * d + i] + w.dt_bias[hd * d + i];
        g[i] = kda && c.kda_has_lower_bound ? c.kda_lower_bound * Sigmoid(a * z)
                                            : -a * std::log1p(std::exp(z));
      }
      std::vector<double> s(st->s.begin() + static_cast<size_t>(hd) * d * d,
                            st->s.begin() + static_cast<size_t>(hd + 1) * d * d);
      std::vector<double> o(d);
      if (kda) {
        KdaStep(d, q, k, v, g.data(), Sigmoid(bp[hd]), &s, o.data());
      } else {
        GlaStep(d, q, k, v, g.data(), &s, o.data());
      }
      std::copy(s.begin(), s.end(), st->s.begin() + static_cast<size_t>(hd) * d * d);
      double ms = 0.0;
      for (int i = 0; i < d; ++i) ms += o[i] * o[i];
      const double inv = 1.0 / std::sqrt(ms / d + c.rms_eps);
      for (int i = 0; i < d; ++i) {
        gated[hd * d + i] = o[i] * inv * w.o_norm[i] * Sigmoid(og[hd * d + i]);
      }
    }
    for (int i = 0; i < dd; ++i) {
      for (int j = 0; j < h; ++j) y[static_cast<size_t>(t) * h + j] += gated[i] * w.o[i * h + j];
    }
  }
  return y;
}

}  // namespace sy::engine::ref
