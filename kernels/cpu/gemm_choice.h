// ChooseGemmLibrary: which BLAS runs a GEMM of a given shape on the CPU backend. OpenBLAS and
// oneDNN each win on some of the shapes a chunk runs (bench/kernels/blas_compare); the choice is
// a pure function of the shape, so every process of a job (and the reference trainer) sends each
// GEMM to the same library and results stay bitwise reproducible across schedules: the two
// libraries sum in different orders, so a shape sent to one here and to the other there would
// differ in the last bits. No dependencies: the benchmarks that compare the libraries print it.
#ifndef PIPETRAIN_KERNELS_CPU_GEMM_CHOICE_H_
#define PIPETRAIN_KERNELS_CPU_GEMM_CHOICE_H_

#include <cstdint>

namespace pipetrain::kernels {

enum class GemmLibrary { kOpenBlas, kOneDnn };

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  bool accumulate = false;  // beta != 0
};

// Which library runs a GEMM of this shape (row-major C[m, n] = op(A)[m, k] op(B)[k, n]).
// `openblas_narrower`: OpenBLAS runs narrower vector kernels than the core has (an AVX-512 core
// with OpenBLAS held to an AVX2 kernel set, as OPENBLAS_CORETYPE=Haswell in the environment
// does); oneDNN then runs every shape. The flag is the same for every process of a host started
// with the same environment, so the choice stays one per shape there.
GemmLibrary ChooseGemmLibrary(const GemmShape& shape, bool openblas_narrower = false);

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_CPU_GEMM_CHOICE_H_
