// The portable VectorKernels, and the choice of table: plain C++ loops in element order (the CPU backend's arithmetic
// before issue 26), for CPUs without AVX2/FMA and as the tests' second implementation.
#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vector_kernels.h"

namespace pipetrain::kernels {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// tanh(u) = 1 - 2 / (exp(2u) + 1): one expf instead of tanhf (~5x faster with glibc), exact to a
// few fp32 ulps and saturating correctly at both ends.
inline float FastTanh(float u) { return 1.0f - 2.0f / (std::exp(2.0f * u) + 1.0f); }

void GeluForward(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + FastTanh(kGeluC * (v + kGeluA * v * v * v)));
  }
}

void GeluBackward(const float* dy, const float* x, int64_t n, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = FastTanh(kGeluC * (v + kGeluA * v * v * v));
    const float d =
        0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] = dy[i] * d;
  }
}

void LayerNormForward(const float* x, const float* g, const float* b, int64_t rows, int64_t h,
                      float eps, float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    float sum = 0.0f;
    for (int64_t j = 0; j < h; ++j) sum += xr[j];
    const float mu = sum / static_cast<float>(h);
    float var = 0.0f;
    for (int64_t j = 0; j < h; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(h) + eps);
    for (int64_t j = 0; j < h; ++j) yr[j] = (xr[j] - mu) * rs * g[j] + b[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void LayerNormBackwardInput(const float* dy, const float* x, const float* g, const float* mean,
                            const float* rstd, const float* residual, int64_t rows, int64_t h,
                            float* dx) {
  const float inv_h = 1.0f / static_cast<float>(h);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h;
    const float* dr = dy + r * h;
    float* out = dx + r * h;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t j = 0; j < h; ++j) {
      const float gj = dr[j] * g[j];
      sum_g += gj;
      sum_gx += gj * (xr[j] - mu) * rs;
    }
    const float mean_g = sum_g * inv_h, mean_gx = sum_gx * inv_h;
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = (xr[j] - mu) * rs;
      out[j] = rs * (dr[j] * g[j] - mean_g - xhat * mean_gx);
      if (residual != nullptr) out[j] += residual[r * h + j];
    }
  }
}

void LayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                             const float* rstd, int64_t rows, int64_t h, float* dg, float* db) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * h;
    const float* dr = dy + r * h;
    const float mu = mean[r], rs = rstd[r];
    for (int64_t j = 0; j < h; ++j) {
      dg[j] += dr[j] * ((xr[j] - mu) * rs);
      db[j] += dr[j];
    }
  }
}

void AddBias(const float* bias, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] += bias[j];
  }
}

void BiasGrad(const float* dy, int64_t rows, int64_t cols, float* db) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dr = dy + r * cols;
    for (int64_t j = 0; j < cols; ++j) db[j] += dr[j];
  }
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Scale(float s, int64_t n, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

float RowMax(const float* x, int64_t n) {
  float mx = x[0];
  for (int64_t j = 1; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  return mx;
}

float ExpShiftSum(const float* x, float shift, int64_t n, float* out) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = std::exp(x[j] - shift);
    sum += out[j];
  }
  return sum;
}

float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

void SoftmaxBackwardRow(const float* p, float dot, float scale, int64_t n, float* dp) {
  for (int64_t j = 0; j < n; ++j) dp[j] = scale * p[j] * (dp[j] - dot);
}

void AdamW(float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
           const float* g, int64_t n, float* p, float* m, float* v) {
  for (int64_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    const float mh = m[i] / bc1;
    const float vh = v[i] / bc2;
    p[i] -= lr * (mh / (std::sqrt(vh) + eps) + wd * p[i]);
  }
}

}  // namespace

const VectorKernels& PortableVectorKernels() {
  static const VectorKernels table = {
      "portable",       GeluForward, GeluBackward, LayerNormForward, LayerNormBackwardInput,
      LayerNormBackwardWeight, AddBias, BiasGrad, Add, Scale, RowMax, ExpShiftSum, Dot,
      SoftmaxBackwardRow, AdamW};
  return table;
}

extern const VectorKernels kAvx2VectorKernels;  // vector_kernels_avx2.cc

const VectorKernels* Avx2VectorKernels() {
  return CpuHasAvx2Fma() ? &kAvx2VectorKernels : nullptr;
}

extern const VectorKernels kAvx512ElementwiseKernels;  // vector_kernels_avx512.cc

const VectorKernels* Avx512VectorKernels() {
  if (!CpuHasAvx512F()) return nullptr;
  static const VectorKernels table = [] {
    VectorKernels t = kAvx2VectorKernels;
    const VectorKernels& wide = kAvx512ElementwiseKernels;
    t.name = wide.name;
    t.gelu_forward = wide.gelu_forward;
    t.gelu_backward = wide.gelu_backward;
    t.add_bias = wide.add_bias;
    t.bias_grad = wide.bias_grad;
    t.add = wide.add;
    t.scale = wide.scale;
    t.softmax_backward_row = wide.softmax_backward_row;
    t.adamw = wide.adamw;
    return t;
  }();
  return &table;
}

}  // namespace pipetrain::kernels
