#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace pipetrain::kernels::cuda {

ScopedDevice::ScopedDevice(int device) {
  int current = -1;
  status_ = ToStatus(cudaGetDevice(&current), "cudaGetDevice", __FILE__, __LINE__);
  if (!status_.ok() || current == device) return;
  status_ = ToStatus(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__);
  if (status_.ok()) previous_ = current;
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

int CurrentDevice() {
  int current = -1;
  return cudaGetDevice(&current) == cudaSuccess ? current : -1;
}

}  // namespace pipetrain::kernels::cuda
