// MeasureCoreSgemmFlops: one CPU core's fp32 GEMM rate, measured once at worker start-up and
// reported at registration (RegisterWorkerRequest.core_sgemm_flops_per_s); the coordinator's MFU
// peak for a CPU worker is this times the cores it computes on (model/device_peaks.h).
//
// Method: square n x n GEMMs (2 n^3 FLOPs each) through the CPU backend on one BLAS thread,
// after one warm-up, repeated until `budget` has passed (at most `max_rounds`); the figure is
// 2 n^3 / the fastest round, the rate the core sustains when nothing else disturbs it. It takes
// about `budget` of one core, bounded.
//
// Thread-safety: sets OpenBLAS to one thread (process-wide) while it runs, and restores
// `restore_blas_threads` after: call it before any compute starts.
#ifndef PIPETRAIN_WORKER_RUNTIME_CORE_SGEMM_H_
#define PIPETRAIN_WORKER_RUNTIME_CORE_SGEMM_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pipetrain::worker {

struct CoreSgemmOptions {
  int n = 256;
  absl::Duration budget = absl::Milliseconds(200);
  int max_rounds = 50;
  int restore_blas_threads = 1;
};

absl::StatusOr<double> MeasureCoreSgemmFlops(const CoreSgemmOptions& options = {});

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_CORE_SGEMM_H_
