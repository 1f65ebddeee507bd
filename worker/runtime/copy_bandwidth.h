// MeasureCopyBandwidth: the worker's own host-link bandwidth, measured at start-up through the
// same copy engine OFFLOAD/RELOAD use (ActivationCopier with this worker's options, so a
// configured link cap is what gets measured), and reported to the coordinator at registration
// (RegisterWorkerRequest.d2h_bytes_per_s / h2d_bytes_per_s) for offload planning.
//
// Method: a `bytes` tensor is offloaded and reloaded `rounds` times; each direction's figure is
// bytes / the fastest copy (the copy ticket's own start/end, not queueing).
//
// Thread-safety: pure function of its arguments (allocates on the backend).
#ifndef PIPETRAIN_WORKER_RUNTIME_COPY_BANDWIDTH_H_
#define PIPETRAIN_WORKER_RUNTIME_COPY_BANDWIDTH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "worker/runtime/activation_copier.h"

namespace pipetrain::worker {

struct CopyBandwidth {
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
};

absl::StatusOr<CopyBandwidth> MeasureCopyBandwidth(kernels::Backend* backend,
                                                   const ActivationCopierOptions& options,
                                                   int64_t bytes = 8 << 20, int rounds = 3);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_COPY_BANDWIDTH_H_
