// pipetrain's own CUDA kernels: elementwise ops, row-wise reductions (block per row, fixed tree),
// two-pass column reductions, the embedding gradients and AdamW (cuda_kernels.h says how each
// reduction stays deterministic).
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <climits>

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
__global__ void ScaleK(float* p, int64_t n, float s) { PT_GRID_LOOP(i, n) p[i] *= s; }
__global__ void AddK(const float* a, const float* b, float* out, int64_t n) {
  PT_GRID_LOOP(i, n) out[i] = a[i] + b[i];
}
__global__ void AddInPlaceK(const float* x, float* y, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] += x[i];
}
__global__ void AddBiasK(const float* bias, float* y, int64_t rows, int64_t cols) {
  PT_GRID_LOOP(i, rows * cols) y[i] += bias[i % cols];
}
__global__ void EmbedFwdK(const int32_t* ids, int64_t n, int64_t t, const float* wte,
                          const float* wpe, float* out, int64_t h) {
  PT_GRID_LOOP(k, n * h) {
    const int64_t i = k / h, j = k % h;
    out[k] = wte[static_cast<int64_t>(ids[i]) * h + j] + wpe[(i % t) * h + j];
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

// ---- Column reductions (two passes, cuda_kernels.h) ----
constexpr int kColTile = 32;  // columns per block (one warp across them: coalesced rows)
constexpr int kRowLanes = 8;  // threads per column in a block, each summing every 8th row

// Folds the kRowLanes values of each column in `sh` with a fixed tree; lane 0 ends with the sum.
__device__ void FoldLanes(float (*sh)[kColTile + 1]) {
  __syncthreads();
  for (int s = kRowLanes / 2; s > 0; s >>= 1) {
    if (threadIdx.y < s) sh[threadIdx.y][threadIdx.x] += sh[threadIdx.y + s][threadIdx.x];
    __syncthreads();
  }
}

// Pass 1: block (kColTile, kRowLanes), grid (column tiles, chunks). part_b[c,j] = sum of dy over
// chunk c's rows; with kLayerNorm also part_a[c,j] = sum of dy * xhat.
template <bool kLayerNorm>
__global__ void ColumnPartialsK(const float* dy, const float* x, const float* mean,
                                const float* rstd, int64_t rows, int64_t cols, int64_t chunk_rows,
                                float* part_a, float* part_b) {
  __shared__ float sa[kRowLanes][kColTile + 1];
  __shared__ float sb[kRowLanes][kColTile + 1];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  float a = 0.0f, b = 0.0f;
  if (j < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const float d = dy[r * cols + j];
      if (kLayerNorm) a += d * ((x[r * cols + j] - mean[r]) * rstd[r]);
      b += d;
    }
  }
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  FoldLanes(sb);
  if (kLayerNorm) FoldLanes(sa);
  if (threadIdx.y == 0 && j < cols) {
    part_b[blockIdx.y * cols + j] = sb[0][threadIdx.x];
    if (kLayerNorm) part_a[blockIdx.y * cols + j] = sa[0][threadIdx.x];
  }
}

// Pass 2: block (kColTile, kRowLanes), grid (column tiles). out[j] = (acc ? out[j] : 0) + the
// chunks' partials, lane y summing chunks y, y + 8, ... in order, then the fixed tree.
__global__ void ColumnFinishK(const float* part, int64_t chunks, int64_t cols, float* out,
                              bool acc) {
  __shared__ float sh[kRowLanes][kColTile + 1];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  float s = 0.0f;
  if (j < cols) {
    for (int64_t c = threadIdx.y; c < chunks; c += kRowLanes) s += part[c * cols + j];
  }
  sh[threadIdx.y][threadIdx.x] = s;
  FoldLanes(sh);
  if (threadIdx.y == 0 && j < cols) out[j] = (acc ? out[j] : 0.0f) + sh[0][threadIdx.x];
}

// ---- Embedding gradients ----
constexpr int kEmbedCols = 256;  // columns per block; grid (plan entries, column tiles)

// Pass 1: partial[s,j] = sum of dout over segment s's tokens, in order.
__global__ void EmbedSegmentsK(const int32_t* plan, int64_t segments_offset, const float* dout,
                               float* partial, int64_t h) {
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kEmbedCols + threadIdx.x;
  if (j >= h) return;
  const int32_t* seg = plan + segments_offset + 2 * static_cast<int64_t>(blockIdx.x);
  float acc = 0.0f;
  for (int32_t p = seg[0]; p < seg[1]; ++p) acc += dout[static_cast<int64_t>(plan[p]) * h + j];
  partial[static_cast<int64_t>(blockIdx.x) * h + j] = acc;
}

// Pass 2, one block row per distinct id: its tokens (light id) or its segments' sums, in order.
__global__ void EmbedRowsK(const int32_t* plan, int64_t rows_offset, const float* dout,
                           const float* partial, float* dwte, int64_t h) {
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kEmbedCols + threadIdx.x;
  if (j >= h) return;
  const int32_t* row = plan + rows_offset + 5 * static_cast<int64_t>(blockIdx.x);
  float* w = dwte + static_cast<int64_t>(row[0]) * h + j;
  float acc = *w;
  if (row[3] == row[4]) {
    for (int32_t p = row[1]; p < row[2]; ++p) acc += dout[static_cast<int64_t>(plan[p]) * h + j];
  } else {
    for (int32_t s = row[3]; s < row[4]; ++s) acc += partial[static_cast<int64_t>(s) * h + j];
  }
  *w = acc;
}

// Thread per (position, column); the batch's tokens at that position in token order.
__global__ void EmbedPositionsK(const float* dout, int64_t n, int64_t t, float* dwpe, int64_t h) {
  PT_GRID_LOOP(k, t * h) {
    const int64_t p = k / h, j = k % h;
    float acc = dwpe[k];
    for (int64_t i = p; i < n; i += t) acc += dout[i * h + j];
    dwpe[k] = acc;
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
// p16, when not null, also receives each probability rounded to bf16 (the next product's input);
// keep_fp32 = false leaves s as it was (a forward that needs only the bf16 copy).
__global__ void CausalSoftmaxK(float* s, int64_t t, __nv_bfloat16* p16, bool keep_fp32) {
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
  __nv_bfloat16* row16 = p16 == nullptr ? nullptr : p16 + r * t;
  for (int64_t j = threadIdx.x; j < t; j += kThreads) {
    const float p = j <= i ? expf(row[j] - m) * inv : 0.0f;
    if (row16 != nullptr) row16[j] = __float2bfloat16_rn(p);
    if (keep_fp32) row[j] = p;
  }
}
// ds16, when not null, also receives dS rounded to bf16.
__global__ void CausalSoftmaxBwdK(const float* p, float* ds, int64_t t, float scale,
                                  __nv_bfloat16* ds16) {
  __shared__ float sh[kThreads];
  const int64_t r = blockIdx.x, i = r % t;
  const float* pr = p + r * t;
  float* dr = ds + r * t;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j <= i; j += kThreads) dot += dr[j] * pr[j];
  const float d = BlockSum(dot, sh);
  __nv_bfloat16* row16 = ds16 == nullptr ? nullptr : ds16 + r * t;
  for (int64_t j = threadIdx.x; j < t; j += kThreads) {
    const float v = j <= i ? scale * pr[j] * (dr[j] - d) : 0.0f;
    dr[j] = v;
    if (row16 != nullptr) row16[j] = __float2bfloat16_rn(v);
  }
}
__global__ void CeFwdK(const float* logits, const int32_t* targets, float* probs, float* row_loss,
                       int32_t* argmax, int64_t v) {
  __shared__ float sv[kThreads];
  __shared__ int si[kThreads];
  const int64_t r = blockIdx.x;
  const float* lr = logits + r * v;
  // As the CPU backend: the first logit greater than everything before it, starting from -inf;
  // INT_MAX marks "none found", and a row where none is found (all -inf or NaN) answers 0.
  float best = __int_as_float(0xff800000);  // -inf
  int bi = INT_MAX;
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
    argmax[r] = arg == INT_MAX ? 0 : arg;
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
__global__ void FlagNonFiniteK(const float* x, int64_t n, int32_t* flag) {
  PT_GRID_LOOP(i, n) {
    if (!isfinite(x[i])) *flag = 1;
  }
}
__global__ void SumOfSquaresLanesK(const float* x, int64_t n, int64_t lanes, double* lane_sums) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= lanes) return;
  double s = 0.0;
  // A float squared is exact in double, so a fused multiply-add rounds as the host's two steps.
  for (int64_t i = j; i < n; i += lanes) {
    const double v = x[i];
    s += v * v;
  }
  lane_sums[j] = s;
}
__global__ void ToBf16K(const float* x, __nv_bfloat16* y, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void FromBf16K(const __nv_bfloat16* x, float* y, int64_t n) {
  PT_GRID_LOOP(i, n) y[i] = __bfloat162float(x[i]);
}

}  // namespace

cudaError_t LaunchFill(float* p, int64_t n, float v, cudaStream_t stream) {
  FillK<<<Blocks(n), kThreads, 0, stream>>>(p, n, v);
  return cudaGetLastError();
}
cudaError_t LaunchScale(float* p, int64_t n, float s, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleK<<<Blocks(n), kThreads, 0, stream>>>(p, n, s);
  return cudaGetLastError();
}
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  AddK<<<Blocks(n), kThreads, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}
cudaError_t LaunchAddInPlace(const float* x, float* y, int64_t n, cudaStream_t stream) {
  AddInPlaceK<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
cudaError_t LaunchAddBias(const float* bias, float* y, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  AddBiasK<<<Blocks(rows * cols), kThreads, 0, stream>>>(bias, y, rows, cols);
  return cudaGetLastError();
}

int64_t ColumnChunkRows(int64_t rows) {
  // At least 128 rows (16 per row lane) so pass 1 has work per thread, at most 1024 chunks so
  // pass 2 stays short; a multiple of the row lanes. A function of `rows` only: determinism.
  const int64_t r = std::max<int64_t>(128, (rows + 1023) / 1024);
  return (r + kRowLanes - 1) / kRowLanes * kRowLanes;
}
int64_t ColumnChunks(int64_t rows) {
  const int64_t per = ColumnChunkRows(rows);
  return std::max<int64_t>(1, (rows + per - 1) / per);
}

namespace {

cudaError_t LaunchColumnReduce(bool layer_norm, const float* dy, const float* x, const float* mean,
                               const float* rstd, int64_t rows, int64_t cols, float* out_a,
                               float* out_b, bool accumulate, float* partials,
                               cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const int64_t chunks = ColumnChunks(rows);
  const dim3 block(kColTile, kRowLanes);
  const unsigned tiles = static_cast<unsigned>((cols + kColTile - 1) / kColTile);
  float* part_b = partials;
  float* part_a = partials + chunks * cols;  // LayerNorm only
  const dim3 grid1(tiles, static_cast<unsigned>(chunks));
  if (layer_norm) {
    ColumnPartialsK<true><<<grid1, block, 0, stream>>>(dy, x, mean, rstd, rows, cols,
                                                       ColumnChunkRows(rows), part_a, part_b);
  } else {
    ColumnPartialsK<false><<<grid1, block, 0, stream>>>(dy, nullptr, nullptr, nullptr, rows, cols,
                                                        ColumnChunkRows(rows), nullptr, part_b);
  }
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  ColumnFinishK<<<tiles, block, 0, stream>>>(part_b, chunks, cols, out_b, accumulate);
  if (layer_norm) {
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    ColumnFinishK<<<tiles, block, 0, stream>>>(part_a, chunks, cols, out_a, accumulate);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, bool accumulate,
                           float* partials, cudaStream_t stream) {
  return LaunchColumnReduce(false, dy, nullptr, nullptr, nullptr, rows, cols, nullptr, db,
                            accumulate, partials, stream);
}
cudaError_t LaunchLayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                          const float* rstd, float* dg, float* db, int64_t rows,
                                          int64_t h, bool accumulate, float* partials,
                                          cudaStream_t stream) {
  return LaunchColumnReduce(true, dy, x, mean, rstd, rows, h, dg, db, accumulate, partials, stream);
}

cudaError_t LaunchEmbeddingForward(const int32_t* ids, int64_t n, int64_t seq_len, const float* wte,
                                   const float* wpe, float* out, int64_t h, cudaStream_t stream) {
  EmbedFwdK<<<Blocks(n * h), kThreads, 0, stream>>>(ids, n, seq_len, wte, wpe, out, h);
  return cudaGetLastError();
}
cudaError_t LaunchEmbeddingBackwardTable(const int32_t* plan, int64_t rows_offset, int64_t num_rows,
                                         int64_t segments_offset, int64_t num_segments,
                                         const float* dout, float* dwte, int64_t h, float* partials,
                                         cudaStream_t stream) {
  if (num_rows == 0 || h == 0) return cudaSuccess;
  const unsigned tiles = static_cast<unsigned>((h + kEmbedCols - 1) / kEmbedCols);
  if (num_segments > 0) {
    EmbedSegmentsK<<<dim3(static_cast<unsigned>(num_segments), tiles), kEmbedCols, 0, stream>>>(
        plan, segments_offset, dout, partials, h);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  EmbedRowsK<<<dim3(static_cast<unsigned>(num_rows), tiles), kEmbedCols, 0, stream>>>(
      plan, rows_offset, dout, partials, dwte, h);
  return cudaGetLastError();
}
cudaError_t LaunchEmbeddingBackwardPositions(const float* dout, int64_t n, int64_t seq_len,
                                             float* dwpe, int64_t h, cudaStream_t stream) {
  EmbedPositionsK<<<Blocks(seq_len * h), kThreads, 0, stream>>>(dout, n, seq_len, dwpe, h);
  return cudaGetLastError();
}
cudaError_t LaunchLayerNormForward(const float* x, const float* g, const float* b, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t h, float eps,
                                   cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LnFwdK<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, g, b, y, mean, rstd, h, eps);
  return cudaGetLastError();
}
cudaError_t LaunchLayerNormBackwardInput(const float* dy, const float* x, const float* g,
                                         const float* mean, const float* rstd, float* dx,
                                         int64_t rows, int64_t h, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LnBwdInK<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(dy, x, g, mean, rstd, dx, h);
  return cudaGetLastError();
}
cudaError_t LaunchGeluForward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  GeluFwdK<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
cudaError_t LaunchGeluBackward(const float* dy, const float* x, float* dx, int64_t n,
                               cudaStream_t stream) {
  GeluBwdK<<<Blocks(n), kThreads, 0, stream>>>(dy, x, dx, n);
  return cudaGetLastError();
}
cudaError_t LaunchCausalSoftmax(float* s, int64_t rows, int64_t t, uint16_t* p16, bool keep_fp32,
                                cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CausalSoftmaxK<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      s, t, reinterpret_cast<__nv_bfloat16*>(p16), keep_fp32);
  return cudaGetLastError();
}
cudaError_t LaunchCausalSoftmaxBackward(const float* p, float* ds, int64_t rows, int64_t t,
                                        float scale, uint16_t* ds16, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CausalSoftmaxBwdK<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      p, ds, t, scale, reinterpret_cast<__nv_bfloat16*>(ds16));
  return cudaGetLastError();
}
cudaError_t LaunchCrossEntropyForward(const float* logits, const int32_t* targets, float* probs,
                                      float* row_loss, int32_t* argmax, int64_t rows, int64_t v,
                                      cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CeFwdK<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, targets, probs, row_loss,
                                                               argmax, v);
  return cudaGetLastError();
}
cudaError_t LaunchCrossEntropyBackward(const float* probs, const int32_t* targets, float* dl,
                                       int64_t rows, int64_t v, float scale, cudaStream_t stream) {
  CeBwdK<<<Blocks(rows * v), kThreads, 0, stream>>>(probs, targets, dl, rows, v, scale);
  return cudaGetLastError();
}
cudaError_t LaunchAdamW(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1,
                        float b2, float eps, float wd, float bc1, float bc2, cudaStream_t stream) {
  AdamWK<<<Blocks(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
  return cudaGetLastError();
}
cudaError_t LaunchFlagNonFinite(const float* x, int64_t n, int32_t* flag, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FlagNonFiniteK<<<Blocks(n), kThreads, 0, stream>>>(x, n, flag);
  return cudaGetLastError();
}
cudaError_t LaunchSumOfSquaresLanes(const float* x, int64_t n, int64_t lanes, double* lane_sums,
                                    cudaStream_t stream) {
  if (lanes == 0) return cudaSuccess;
  SumOfSquaresLanesK<<<Blocks(lanes), kThreads, 0, stream>>>(x, n, lanes, lane_sums);
  return cudaGetLastError();
}
cudaError_t LaunchToBf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  ToBf16K<<<Blocks(n), kThreads, 0, stream>>>(x, reinterpret_cast<__nv_bfloat16*>(y), n);
  return cudaGetLastError();
}
cudaError_t LaunchFromBf16(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  FromBf16K<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<const __nv_bfloat16*>(x), y, n);
  return cudaGetLastError();
}

}  // namespace pipetrain::kernels::cuda
