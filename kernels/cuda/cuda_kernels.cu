// pipetrain's own CUDA kernels: elementwise ops, row-wise reductions (block per row, fixed tree),
// column reductions (thread per column, sequential over rows) and AdamW.
#include <cuda_bf16.h>

#include <cfloat>

#include "kernels/cuda/cuda_kernels.h"

namespace pipetrain::kernels::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b > 65535 * 32 ? 65535 * 32 : (b < 1 ? 1 : b));
}

// Grid-stride loop over [0, n).
#define PT_GRID_LOOP(i, n)                                                               \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Sum over the block (blockDim.x == kThreads); every thread gets the result.
__device__ float BlockSum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

// Max with first-index tie break over the block.
__device__ void BlockArgMax(float v, int idx, float* sv, int* si, float* out_v, int* out_i) {
  sv[threadIdx.x] = v;
  si[threadIdx.x] = idx;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = sv[threadIdx.x + s];
      const int oi = si[threadIdx.x + s];
      if (ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < si[threadIdx.x])) {
        sv[threadIdx.x] = ov;
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  *out_v = sv[0];
  *out_i = si[0];
  __syncthreads();
}

__global__ void FillK(float* p, int64_t n, float v) { PT_GRID_LOOP(i, n) p[i] = v; }
__global__ void AddK(const float* a, const float* b, float* out, int64_t n) {
  PT_GRID_LOOP(i, n) out[i] = a[i] + b[i];
}
__global__ void AddInPlaceK(const float* x, float* y, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] += x[i];
}
__global__ void AddBiasK(const float* bias, float* y, int64_t rows, int64_t cols) {
  PT_GRID_LOOP(i, rows * cols) y[i] += bias[i % cols];
}
__global__ void BiasGradK(const float* dy, float* db, int64_t rows, int64_t cols, bool acc) {
  PT_GRID_LOOP(j, cols) {
    float s = acc ? db[j] : 0.0f;
    for (int64_t r = 0; r < rows; ++r) s += dy[r * cols + j];
    db[j] = s;
  }
}
__global__ void EmbedFwdK(const int32_t* ids, int64_t n, int64_t t, const float* wte,
                          const float* wpe, float* out, int64_t h) {
  PT_GRID_LOOP(k, n * h) {
    const int64_t i = k / h, j = k % h;
    out[k] = wte[static_cast<int64_t>(ids[i]) * h + j] + wpe[(i % t) * h + j];
  }
}
// Thread per hidden column; tokens in order, so the scatter-add is race-free and deterministic.
__global__ void EmbedBwdK(const int32_t* ids, int64_t n, int64_t t, const float* dout, float* dwte,
                          float* dwpe, int64_t h) {
  PT_GRID_LOOP(j, h) {
    for (int64_t i = 0; i < n; ++i) {
      const float d = dout[i * h + j];
      dwte[static_cast<int64_t>(ids[i]) * h + j] += d;
      dwpe[(i % t) * h + j] += d;
    }
  }
}
__global__ void LnFwdK(const float* x, const float* g, const float* b, float* y, float* mean,
                       float* rstd, int64_t h, float eps) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * h;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += kThreads) s += xr[j];
  const float mu = BlockSum(s, sh) / static_cast<float>(h);
  float v = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += kThreads) v += (xr[j] - mu) * (xr[j] - mu);
  const float rs = rsqrtf(BlockSum(v, sh) / static_cast<float>(h) + eps);
  for (int64_t j = threadIdx.x; j < h; j += kThreads)
    y[r * h + j] = (xr[j] - mu) * rs * g[j] + b[j];
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}
__global__ void LnBwdInK(const float* dy, const float* x, const float* g, const float* mean,
                         const float* rstd, float* dx, int64_t h) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x;
  const float mu = mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t j = threadIdx.x; j < h; j += kThreads) {
    const float gj = dy[r * h + j] * g[j];
    sg += gj;
    sgx += gj * (x[r * h + j] - mu) * rs;
  }
  const float mg = BlockSum(sg, sh) / static_cast<float>(h);
  const float mgx = BlockSum(sgx, sh) / static_cast<float>(h);
  for (int64_t j = threadIdx.x; j < h; j += kThreads) {
    const float xhat = (x[r * h + j] - mu) * rs;
    dx[r * h + j] = rs * (dy[r * h + j] * g[j] - mg - xhat * mgx);
  }
}
__global__ void LnBwdWK(const float* dy, const float* x, const float* mean, const float* rstd,
                        float* dg, float* db, int64_t rows, int64_t h, bool acc) {
  PT_GRID_LOOP(j, h) {
    float sg = acc ? dg[j] : 0.0f, sb = acc ? db[j] : 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      sg += dy[r * h + j] * ((x[r * h + j] - mean[r]) * rstd[r]);
      sb += dy[r * h + j];
    }
    dg[j] = sg;
    db[j] = sb;
  }
}
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;
__global__ void GeluFwdK(const float* x, float* y, int64_t n) {
  PT_GRID_LOOP(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluA * v * v * v)));
  }
}
__global__ void GeluBwdK(const float* dy, const float* x, float* dx, int64_t n) {
  PT_GRID_LOOP(i, n) {
    const float v = x[i];
    const float t = tanhf(kGeluC * (v + kGeluA * v * v * v));
    dx[i] = dy[i] * (0.5f * (1.0f + t) +
                     0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * v * v));
  }
}
__global__ void CausalSoftmaxK(float* s, int64_t t) {
  __shared__ float sh[kThreads];
  __shared__ int si[kThreads];
  const int64_t r = blockIdx.x, i = r % t;
  float* row = s + r * t;
  float mx = -FLT_MAX;
  for (int64_t j = threadIdx.x; j <= i; j += kThreads) mx = fmaxf(mx, row[j]);
  float m;
  int unused;
  BlockArgMax(mx, 0, sh, si, &m, &unused);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += kThreads) sum += expf(row[j] - m);
  const float inv = 1.0f / BlockSum(sum, sh);
  for (int64_t j = threadIdx.x; j < t; j += kThreads)
    row[j] = j <= i ? expf(row[j] - m) * inv : 0.0f;
}
__global__ void CausalSoftmaxBwdK(const float* p, float* ds, int64_t t, float scale) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x, i = r % t;
  const float* pr = p + r * t;
  float* dr = ds + r * t;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += kThreads) dot += dr[j] * pr[j];
  const float d = BlockSum(dot, sh);
  for (int64_t j = threadIdx.x; j < t; j += kThreads) {
    dr[j] = j <= i ? scale * pr[j] * (dr[j] - d) : 0.0f;
  }
}
__global__ void CeFwdK(const float* logits, const int32_t* targets, float* probs, float* row_loss,
                       int32_t* argmax, int64_t v) {
  __shared__ float sv[kThreads];
  __shared__ int si[kThreads];
  const int64_t r = blockIdx.x;
  const float* lr = logits + r * v;
  float best = -FLT_MAX;
  int bi = 0x7fffffff;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) {
    if (lr[j] > best) {
      best = lr[j];
      bi = static_cast<int>(j);
    }
  }
  float mx;
  int arg;
  BlockArgMax(best, bi, sv, si, &mx, &arg);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) s += expf(lr[j] - mx);
  const float sum = BlockSum(s, sv);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) probs[r * v + j] = expf(lr[j] - mx) * inv;
  if (threadIdx.x == 0) {
    argmax[r] = arg;
    const int32_t t = targets[r];
    row_loss[r] = t < 0 ? 0.0f : logf(sum) + mx - lr[t];
  }
}
__global__ void CeBwdK(const float* probs, const int32_t* targets, float* dl, int64_t rows,
                       int64_t v, float scale) {
  PT_GRID_LOOP(k, rows * v) {
    const int64_t r = k / v, j = k % v;
    const int32_t t = targets[r];
    dl[k] = t < 0 ? 0.0f : (probs[k] - (j == t ? 1.0f : 0.0f)) * scale;
  }
}
__global__ void AdamWK(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1,
                       float b2, float eps, float wd, float bc1, float bc2) {
  PT_GRID_LOOP(i, n) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    const float mh = m[i] / bc1, vh = v[i] / bc2;
    p[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * p[i]);
  }
}
__global__ void ToBf16K(const float* x, __nv_bfloat16* y, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

}  // namespace

cudaError_t LaunchFill(float* p, int64_t n, float v) {
  FillK<<<Blocks(n), kThreads>>>(p, n, v);
  return cudaGetLastError();
}
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n) {
  AddK<<<Blocks(n), kThreads>>>(a, b, out, n);
  return cudaGetLastError();
}
cudaError_t LaunchAddInPlace(const float* x, float* y, int64_t n) {
  AddInPlaceK<<<Blocks(n), kThreads>>>(x, y, n);
  return cudaGetLastError();
}
cudaError_t LaunchAddBias(const float* bias, float* y, int64_t rows, int64_t cols) {
  AddBiasK<<<Blocks(rows * cols), kThreads>>>(bias, y, rows, cols);
  return cudaGetLastError();
}
cudaError_t LaunchBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols,
                           bool accumulate) {
  BiasGradK<<<Blocks(cols), kThreads>>>(dy, db, rows, cols, accumulate);
  return cudaGetLastError();
}
cudaError_t LaunchEmbeddingForward(const int32_t* ids, int64_t n, int64_t seq_len, const float* wte,
                                   const float* wpe, float* out, int64_t h) {
  EmbedFwdK<<<Blocks(n * h), kThreads>>>(ids, n, seq_len, wte, wpe, out, h);
  return cudaGetLastError();
}
cudaError_t LaunchEmbeddingBackward(const int32_t* ids, int64_t n, int64_t seq_len,
                                    const float* dout, float* dwte, float* dwpe, int64_t h) {
  EmbedBwdK<<<Blocks(h), kThreads>>>(ids, n, seq_len, dout, dwte, dwpe, h);
  return cudaGetLastError();
}
cudaError_t LaunchLayerNormForward(const float* x, const float* g, const float* b, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t h, float eps) {
  if (rows == 0) return cudaSuccess;
  LnFwdK<<<static_cast<unsigned>(rows), kThreads>>>(x, g, b, y, mean, rstd, h, eps);
  return cudaGetLastError();
}
cudaError_t LaunchLayerNormBackwardInput(const float* dy, const float* x, const float* g,
                                         const float* mean, const float* rstd, float* dx,
                                         int64_t rows, int64_t h) {
  if (rows == 0) return cudaSuccess;
  LnBwdInK<<<static_cast<unsigned>(rows), kThreads>>>(dy, x, g, mean, rstd, dx, h);
  return cudaGetLastError();
}
cudaError_t LaunchLayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                          const float* rstd, float* dg, float* db, int64_t rows,
                                          int64_t h, bool accumulate) {
  LnBwdWK<<<Blocks(h), kThreads>>>(dy, x, mean, rstd, dg, db, rows, h, accumulate);
  return cudaGetLastError();
}
cudaError_t LaunchGeluForward(const float* x, float* y, int64_t n) {
  GeluFwdK<<<Blocks(n), kThreads>>>(x, y, n);
  return cudaGetLastError();
}
cudaError_t LaunchGeluBackward(const float* dy, const float* x, float* dx, int64_t n) {
  GeluBwdK<<<Blocks(n), kThreads>>>(dy, x, dx, n);
  return cudaGetLastError();
}
cudaError_t LaunchCausalSoftmax(float* s, int64_t rows, int64_t t) {
  if (rows == 0) return cudaSuccess;
  CausalSoftmaxK<<<static_cast<unsigned>(rows), kThreads>>>(s, t);
  return cudaGetLastError();
}
cudaError_t LaunchCausalSoftmaxBackward(const float* p, float* ds, int64_t rows, int64_t t,
                                        float scale) {
  if (rows == 0) return cudaSuccess;
  CausalSoftmaxBwdK<<<static_cast<unsigned>(rows), kThreads>>>(p, ds, t, scale);
  return cudaGetLastError();
}
cudaError_t LaunchCrossEntropyForward(const float* logits, const int32_t* targets, float* probs,
                                      float* row_loss, int32_t* argmax, int64_t rows, int64_t v) {
  if (rows == 0) return cudaSuccess;
  CeFwdK<<<static_cast<unsigned>(rows), kThreads>>>(logits, targets, probs, row_loss, argmax, v);
  return cudaGetLastError();
}
cudaError_t LaunchCrossEntropyBackward(const float* probs, const int32_t* targets, float* dl,
                                       int64_t rows, int64_t v, float scale) {
  CeBwdK<<<Blocks(rows * v), kThreads>>>(probs, targets, dl, rows, v, scale);
  return cudaGetLastError();
}
cudaError_t LaunchAdamW(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1,
                        float b2, float eps, float wd, float bc1, float bc2) {
  AdamWK<<<Blocks(n), kThreads>>>(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
  return cudaGetLastError();
}
cudaError_t LaunchToBf16(const float* x, uint16_t* y, int64_t n) {
  ToBf16K<<<Blocks(n), kThreads>>>(x, reinterpret_cast<__nv_bfloat16*>(y), n);
  return cudaGetLastError();
}

}  // namespace pipetrain::kernels::cuda
