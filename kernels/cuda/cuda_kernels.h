// Launchers for pipetrain's own CUDA kernels (everything but the GEMMs). All take device
// pointers, run on the legacy default stream and return cudaGetLastError() of the launch.
// Every reduction is a fixed-shape tree or a sequential loop, so results are deterministic.
// Thread-safety: stateless.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_KERNELS_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace pipetrain::kernels::cuda {

cudaError_t LaunchFill(float* p, int64_t n, float v);
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n);
cudaError_t LaunchAddInPlace(const float* x, float* y, int64_t n);
cudaError_t LaunchAddBias(const float* bias, float* y, int64_t rows, int64_t cols);
cudaError_t LaunchBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, bool accumulate);
cudaError_t LaunchEmbeddingForward(const int32_t* ids, int64_t n, int64_t seq_len, const float* wte,
                                   const float* wpe, float* out, int64_t h);
cudaError_t LaunchEmbeddingBackward(const int32_t* ids, int64_t n, int64_t seq_len,
                                    const float* dout, float* dwte, float* dwpe, int64_t h);
cudaError_t LaunchLayerNormForward(const float* x, const float* g, const float* b, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t h, float eps);
cudaError_t LaunchLayerNormBackwardInput(const float* dy, const float* x, const float* g,
                                         const float* mean, const float* rstd, float* dx,
                                         int64_t rows, int64_t h);
cudaError_t LaunchLayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                          const float* rstd, float* dg, float* db, int64_t rows,
                                          int64_t h, bool accumulate);
cudaError_t LaunchGeluForward(const float* x, float* y, int64_t n);
cudaError_t LaunchGeluBackward(const float* dy, const float* x, float* dx, int64_t n);
// In place over rows of length t; row r is causal row (r % t).
cudaError_t LaunchCausalSoftmax(float* s, int64_t rows, int64_t t);
// ds (holding dP) <- scale * P * (dP - rowsum(dP * P)), zero above the diagonal.
cudaError_t LaunchCausalSoftmaxBackward(const float* p, float* ds, int64_t rows, int64_t t,
                                        float scale);
// probs <- softmax(logits) per row; row_loss[r] = lse - logit[target] (0 if ignored);
// argmax[r] = first index of the row maximum.
cudaError_t LaunchCrossEntropyForward(const float* logits, const int32_t* targets, float* probs,
                                      float* row_loss, int32_t* argmax, int64_t rows, int64_t v);
cudaError_t LaunchCrossEntropyBackward(const float* probs, const int32_t* targets, float* dl,
                                       int64_t rows, int64_t v, float scale);
cudaError_t LaunchAdamW(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1,
                        float b2, float eps, float wd, float bc1, float bc2);
// fp32 -> bf16 (stored as raw uint16 bits, round to nearest even).
cudaError_t LaunchToBf16(const float* x, uint16_t* y, int64_t n);

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_KERNELS_H_
