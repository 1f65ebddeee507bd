// Launchers for pipetrain's own CUDA kernels (everything but the GEMMs). All take device
// pointers, queue their kernels on `stream` (a CudaBackend's compute stream) and return
// cudaGetLastError() of the launch.
// Determinism: no atomics anywhere. Row reductions are one block per row with a fixed tree.
// Column reductions (bias and LayerNorm weight gradients) are two-pass: pass 1 gives each block
// a fixed chunk of rows (ColumnChunkRows, a function of the row count only) and 32 columns, each
// thread summing its rows in order and the block folding its 8 row lanes with a fixed tree into
// one partial per (chunk, column); pass 2 folds the partials of a column in a fixed order. The
// embedding table gradient follows an EmbeddingGradPlan (kernels/embedding_grad_plan.h); the
// position-table gradient sums each (position, column) over the batch in token order.
// Thread-safety: stateless.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_KERNELS_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pipetrain::kernels::cuda {

cudaError_t LaunchFill(float* p, int64_t n, float v, cudaStream_t stream);
// p[i] *= s.
cudaError_t LaunchScale(float* p, int64_t n, float s, cudaStream_t stream);
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
cudaError_t LaunchAddInPlace(const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t LaunchAddBias(const float* bias, float* y, int64_t rows, int64_t cols,
                          cudaStream_t stream);

// Rows per pass-1 chunk of a column reduction over `rows` rows, and the chunk count. The partials
// scratch of one reduced quantity holds ColumnChunks(rows) * cols floats.
int64_t ColumnChunkRows(int64_t rows);
int64_t ColumnChunks(int64_t rows);
// db[j] (+)= sum_r dy[r,j]; `partials`: ColumnChunks(rows) * cols floats of scratch.
cudaError_t LaunchBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, bool accumulate,
                           float* partials, cudaStream_t stream);
// dg (+)= sum_r dy * xhat, db (+)= sum_r dy; `partials`: 2 * ColumnChunks(rows) * h floats.
cudaError_t LaunchLayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                          const float* rstd, float* dg, float* db, int64_t rows,
                                          int64_t h, bool accumulate, float* partials,
                                          cudaStream_t stream);

cudaError_t LaunchEmbeddingForward(const int32_t* ids, int64_t n, int64_t seq_len, const float* wte,
                                   const float* wpe, float* out, int64_t h, cudaStream_t stream);
// dwte += per the plan (EmbeddingGradPlan::packed staged at `plan`); `partials`:
// num_segments * h floats of scratch (unused when there are no segments).
cudaError_t LaunchEmbeddingBackwardTable(const int32_t* plan, int64_t rows_offset, int64_t num_rows,
                                         int64_t segments_offset, int64_t num_segments,
                                         const float* dout, float* dwte, int64_t h, float* partials,
                                         cudaStream_t stream);
// dwpe[p,:] += sum of dout[n,:] over n = p, p + seq_len, ... (token order), p < seq_len.
cudaError_t LaunchEmbeddingBackwardPositions(const float* dout, int64_t n, int64_t seq_len,
                                             float* dwpe, int64_t h, cudaStream_t stream);

cudaError_t LaunchLayerNormForward(const float* x, const float* g, const float* b, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t h, float eps,
                                   cudaStream_t stream);
cudaError_t LaunchLayerNormBackwardInput(const float* dy, const float* x, const float* g,
                                         const float* mean, const float* rstd, float* dx,
                                         int64_t rows, int64_t h, cudaStream_t stream);
cudaError_t LaunchGeluForward(const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t LaunchGeluBackward(const float* dy, const float* x, float* dx, int64_t n,
                               cudaStream_t stream);
// In place over rows of length t; row r is causal row (r % t). p16 (optional, raw bf16 bits, same
// layout) also receives every probability rounded to bf16; keep_fp32 = false writes p16 alone.
cudaError_t LaunchCausalSoftmax(float* s, int64_t rows, int64_t t, uint16_t* p16, bool keep_fp32,
                                cudaStream_t stream);
// ds (holding dP) <- scale * P * (dP - rowsum(dP * P)), zero above the diagonal; ds16 (optional)
// also receives it rounded to bf16.
cudaError_t LaunchCausalSoftmaxBackward(const float* p, float* ds, int64_t rows, int64_t t,
                                        float scale, uint16_t* ds16, cudaStream_t stream);
// probs <- softmax(logits) per row; row_loss[r] = lse - logit[target] (0 if ignored);
// argmax[r] = first index of the row maximum, 0 when no logit compares greater than -inf (the
// CPU backend's answer for a row of -inf or NaN).
cudaError_t LaunchCrossEntropyForward(const float* logits, const int32_t* targets, float* probs,
                                      float* row_loss, int32_t* argmax, int64_t rows, int64_t v,
                                      cudaStream_t stream);
cudaError_t LaunchCrossEntropyBackward(const float* probs, const int32_t* targets, float* dl,
                                       int64_t rows, int64_t v, float scale, cudaStream_t stream);
cudaError_t LaunchAdamW(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1,
                        float b2, float eps, float wd, float bc1, float bc2, cudaStream_t stream);
// *flag <- 1 if any of x[0..n) is NaN or Inf; otherwise *flag is left as it was (the caller
// zeroes it once for a set of tensors). Every writer stores the same value, so the result is
// deterministic without atomics.
cudaError_t LaunchFlagNonFinite(const float* x, int64_t n, int32_t* flag, cudaStream_t stream);
// lane_sums[j] <- the sum in double, in element order, of x[i]^2 over i = j, j + lanes, ...: the
// lanes of HostSumOfSquares (kernels/backend.h), one thread per lane, each load coalesced.
cudaError_t LaunchSumOfSquaresLanes(const float* x, int64_t n, int64_t lanes, double* lane_sums,
                                    cudaStream_t stream);
// fp32 -> bf16 (stored as raw uint16 bits, round to nearest even).
cudaError_t LaunchToBf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
cudaError_t LaunchFromBf16(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_KERNELS_H_
