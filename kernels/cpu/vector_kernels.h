// The CPU backend's non-GEMM inner loops, as a table of functions with three implementations:
// "avx2-fma" (intrinsics, 8 floats at a time, its own vectorised exp), "avx512" (the AVX2 table
// with its elementwise functions 16 floats at a time, bitwise the same results) and "portable"
// (plain C++ loops, std::exp). CpuBackend picks the widest table the CPU runs, unless its
// options ask for the portable one; the tests run the backend with the best and the portable
// table and check the AVX-512 functions against the AVX2 ones bit for bit.
//
// Determinism: every function's result depends only on its inputs and sizes, never on pointer
// alignment or on how many rows it is given: reductions use a fixed lane layout and a fixed
// final order, and a row's tail (the last n % 8 elements) goes through the same vector code via
// a padded copy. The two tables differ from each other in the last bits (FMA contraction, the
// exp polynomial), never from run to run.
#ifndef PIPETRAIN_KERNELS_CPU_VECTOR_KERNELS_H_
#define PIPETRAIN_KERNELS_CPU_VECTOR_KERNELS_H_

#include <cstdint>

namespace pipetrain::kernels {

struct VectorKernels {
  const char* name;
  // y = gelu(x) (tanh approximation) and dx = dy * gelu'(x), n elements.
  void (*gelu_forward)(const float* x, int64_t n, float* y);
  void (*gelu_backward)(const float* dy, const float* x, int64_t n, float* dx);
  // LayerNorm over rows of h (see Backend); backward_weight accumulates into dgamma, dbeta.
  void (*layer_norm_forward)(const float* x, const float* gamma, const float* beta, int64_t rows,
                             int64_t h, float eps, float* y, float* mean, float* rstd);
  // dx = the input gradient, plus residual[r, j] when residual is not null (the gradient that
  // reaches a pre-LN block's input by the skip connection: one pass instead of two).
  void (*layer_norm_backward_input)(const float* dy, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, const float* residual,
                                    int64_t rows, int64_t h, float* dx);
  void (*layer_norm_backward_weight)(const float* dy, const float* x, const float* mean,
                                     const float* rstd, int64_t rows, int64_t h, float* dgamma,
                                     float* dbeta);
  // y[r,:] += bias for every row; db += sum over rows of dy (rows in order).
  void (*add_bias)(const float* bias, int64_t rows, int64_t cols, float* y);
  void (*bias_grad)(const float* dy, int64_t rows, int64_t cols, float* db);
  // out = a + b (out may alias a or b); x *= s.
  void (*add)(const float* a, const float* b, int64_t n, float* out);
  void (*scale)(float s, int64_t n, float* x);
  // The largest of x[0..n) (n >= 1).
  float (*row_max)(const float* x, int64_t n);
  // out[j] = exp(x[j] - shift); returns the sum of out (fixed order). out may alias x.
  float (*exp_shift_sum)(const float* x, float shift, int64_t n, float* out);
  // sum of a[j] * b[j] (fixed order).
  float (*dot)(const float* a, const float* b, int64_t n);
  // The softmax backward of one row: dp[j] = scale * p[j] * (dp[j] - dot).
  void (*softmax_backward_row)(const float* p, float dot, float scale, int64_t n, float* dp);
  // One AdamW step (Backend's formula) with bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t.
  void (*adamw)(float lr, float beta1, float beta2, float eps, float weight_decay, float bc1,
                float bc2, const float* grad, int64_t n, float* param, float* m, float* v);
};

const VectorKernels& PortableVectorKernels();
// nullptr when the CPU lacks AVX2 or FMA.
const VectorKernels* Avx2VectorKernels();
// nullptr when the CPU lacks AVX2, FMA or AVX-512F.
const VectorKernels* Avx512VectorKernels();

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_VECTOR_KERNELS_H_
