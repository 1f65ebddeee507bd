// The CUDA CopyEngine (kernels/copy_engine.h) of a CudaBackend: one dedicated non-blocking copy
// stream per engine (an ActivationCopier asks for one per copy thread, so D2H and H2D copies get
// separate streams when it is duplex). FenceCompute records an event on the backend's compute
// stream (on the thread driving the backend, at OFFLOAD/RELOAD issue); Copy, on the copy thread,
// makes the backend's device current, makes the copy stream wait for that event,
// cudaMemcpyAsync's every segment (host sides are pinned: truly asynchronous) and synchronises
// the copy stream, so a finished Copy means the bytes are there. Neither step waits for the
// compute stream on the host.
// Thread-safety: see copy_engine.h.
#ifndef PIPETRAIN_KERNELS_CUDA_CUDA_COPY_ENGINE_H_
#define PIPETRAIN_KERNELS_CUDA_CUDA_COPY_ENGINE_H_

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/copy_engine.h"

namespace pipetrain::kernels::cuda {

// `compute_stream` (on `device`) must outlive the engine.
absl::StatusOr<std::unique_ptr<CopyEngine>> MakeCudaCopyEngine(int device,
                                                               cudaStream_t compute_stream);

}  // namespace pipetrain::kernels::cuda

#endif  // PIPETRAIN_KERNELS_CUDA_CUDA_COPY_ENGINE_H_
