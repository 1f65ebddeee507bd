// A trivial CUDA probe used to prove the CUDA toolchain, cuBLAS and NCCL link in every build.
// Thread-safety: the function is thread-safe.
#ifndef PIPETRAIN_KERNELS_CUDA_SMOKE_H_
#define PIPETRAIN_KERNELS_CUDA_SMOKE_H_

namespace pipetrain::kernels::cuda {

// Number of CUDA devices visible (0 when there is no driver or GPU).
int DeviceCount();
// Runs y = a*x + y on the GPU for 4 floats and returns y[3]; requires DeviceCount() > 0.
float SaxpySmoke(float a);
// The NCCL library version (works without a GPU).
int NcclVersion();

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_SMOKE_H_
