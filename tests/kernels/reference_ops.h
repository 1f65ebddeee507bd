// Float64 reference implementations of the backend ops (straight loops, no BLAS) and helpers for
// the kernel tests. Thread-safety: pure functions.
#ifndef PIPETRAIN_TESTS_KERNELS_REFERENCE_OPS_H_
#define PIPETRAIN_TESTS_KERNELS_REFERENCE_OPS_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace pipetrain::kernels::testing {

using VecD = std::vector<double>;

// Uniform values in [-scale, scale] with |v| >= 0.05 * scale (never zero).
inline std::vector<float> RandomNonZero(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.05f * scale, scale);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = sign(rng) ? mag(rng) : -mag(rng);
  return v;
}

inline VecD ToDouble(const std::vector<float>& v) { return VecD(v.begin(), v.end()); }

// c[m,n] = op(a) op(b); a stored [ra, ca], b stored [rb, cb].
inline VecD RefGemm(const VecD& a, int64_t ra, int64_t ca, bool ta, const VecD& b, int64_t rb,
                    int64_t cb, bool tb) {
  const int64_t m = ta ? ca : ra, k = ta ? ra : ca, n = tb ? rb : cb;
  VecD c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * ca + i] : a[i * ca + p];
        const double bv = tb ? b[j * cb + p] : b[p * cb + j];
        s += av * bv;
      }
      c[i * n + j] = s;
    }
  return c;
}

inline double RefGelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
inline double RefGeluGrad(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}

// Layernorm forward for rows x h; returns y and fills mean/rstd.
inline VecD RefLayerNorm(const VecD& x, const VecD& g, const VecD& b, int64_t rows, int64_t h,
                         VecD* mean, VecD* rstd) {
  VecD y(x.size());
  mean->assign(rows, 0);
  rstd->assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < h; ++j) mu += x[r * h + j];
    mu /= h;
    for (int64_t j = 0; j < h; ++j) var += (x[r * h + j] - mu) * (x[r * h + j] - mu);
    const double rs = 1.0 / std::sqrt(var / h + 1e-5);
    for (int64_t j = 0; j < h; ++j) y[r * h + j] = (x[r * h + j] - mu) * rs * g[j] + b[j];
    (*mean)[r] = mu;
    (*rstd)[r] = rs;
  }
  return y;
}

// Causal attention forward in float64: returns out [B*T, H] and fills probs [B,nh,T,T].
// bf16_probs: the output multiplies each probability rounded to bf16 (as a bf16 job's P V).
inline VecD RefAttention(const VecD& qkv, int64_t B, int64_t T, int64_t nh, int64_t H,
                         VecD* probs, bool bf16_probs = false) {
  const int64_t hd = H / nh, h3 = 3 * H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  VecD out(static_cast<size_t>(B * T * H), 0.0);
  probs->assign(static_cast<size_t>(B * nh * T * T), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < T; ++i) {
        VecD s(static_cast<size_t>(i + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e)
            d += qkv[(b * T + i) * h3 + h * hd + e] * qkv[(b * T + j) * h3 + H + h * hd + e];
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j <= i; ++j) {
          const double exact = s[j] / sum;
          (*probs)[((b * nh + h) * T + i) * T + j] = exact;
          const double p = bf16_probs ? RoundToBf16(static_cast<float>(exact)) : exact;
          for (int64_t e = 0; e < hd; ++e)
            out[(b * T + i) * H + h * hd + e] += p * qkv[(b * T + j) * h3 + 2 * H + h * hd + e];
        }
      }
  return out;
}

}  // namespace pipetrain::kernels::testing

#endif  // PIPETRAIN_TESTS_KERNELS_REFERENCE_OPS_H_
