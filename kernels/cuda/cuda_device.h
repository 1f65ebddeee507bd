// ScopedDevice: makes a CUDA device current on the calling thread for a scope and restores the
// previous one after. The CUDA runtime's current device is per thread, and a backend or transport
// is created on one thread and driven from others (the executor, copy threads, the transport's
// own thread), so every entry point that issues CUDA work opens one of these; when the device is
// already current it costs one cudaGetDevice.
// PT_CUDA_DEVICE_SCOPE(device) opens one for the rest of the enclosing function and returns its
// error (an absl::Status) if the device cannot be made current.
// Thread-safety: affects only the calling thread; not to be shared between threads.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_DEVICE_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_DEVICE_H_

#include "absl/status/status.h"

namespace pipetrain::kernels::cuda {

class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;  // -1: nothing to restore
  absl::Status status_;
};

// The calling thread's current device, or -1 when it cannot be read.
int CurrentDevice();

}  // namespace pipetrain::kernels::cuda

#define PT_CUDA_DEVICE_SCOPE(device)                                      \
  ::pipetrain::kernels::cuda::ScopedDevice pt_cuda_device_scope_(device); \
  do {                                                                    \
    if (!pt_cuda_device_scope_.status().ok()) {                           \
      return pt_cuda_device_scope_.status();                              \
    }                                                                     \
  } while (0)

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_DEVICE_H_
