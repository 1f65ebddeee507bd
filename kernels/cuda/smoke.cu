#include "kernels/cuda/smoke.h"

#include <cuda_runtime.h>
#include <nccl.h>

namespace pipetrain::kernels::cuda {
namespace {
__global__ void Saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
}  // namespace

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

float SaxpySmoke(float a) {
  const float hx[4] = {1, 2, 3, 4};
  float hy[4] = {10, 20, 30, 40};
  float *dx = nullptr, *dy = nullptr;
  cudaMalloc(&dx, sizeof(hx));
  cudaMalloc(&dy, sizeof(hy));
  cudaMemcpy(dx, hx, sizeof(hx), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, hy, sizeof(hy), cudaMemcpyHostToDevice);
  Saxpy<<<1, 32>>>(4, a, dx, dy);
  cudaMemcpy(hy, dy, sizeof(hy), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  return hy[3];
}

int NcclVersion() {
  int version = 0;
  ncclGetVersion(&version);
  return version;
}

}  // namespace pipetrain::kernels::cuda
