// The peak a job's model FLOP/s is compared with (MFU, docs/training.md "Metrics"): a worker's
// dense peak for the job's precision.
//   CPU: one core's fp32 GEMM rate, measured by the worker at start-up
//        (RegisterWorkerRequest.core_sgemm_flops_per_s), times the cores it computes on
//        (its BLAS threads, at most its usable cores).
//   CUDA: the vendor's published dense peak for the device name (no sparsity): the tensor-core
//        bf16 rate for PRECISION_BF16, the fp32 (non-tensor-core) rate for PRECISION_FP32,
//        which is what pipetrain's fp32 GEMMs run at. A name not in the table is unknown: no
//        guess.
//   Emulated workers compute nothing: unknown.
// Unknown is a peak of 0 with the reason in `source`; the coordinator then reports no MFU.
//
// Thread-safety: pure functions over a constant table.
#ifndef PIPETRAIN_MODEL_DEVICE_PEAKS_H_
#define PIPETRAIN_MODEL_DEVICE_PEAKS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "pipetrain/v1/common.pb.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::model {

struct PeakFlops {
  double flops_per_s = 0;  // 0: unknown
  std::string source;      // how it was found, or why it is unknown
};

// One row of the published-peak table.
struct GpuPeak {
  const char* model;        // the name's model token, e.g. "H100"
  const char* variant;      // a further token the name must hold ("PCIe", "NVL"), or "" for any
  double fp32_flops_per_s;  // dense fp32 (CUDA cores)
  double bf16_flops_per_s;  // dense bf16 tensor cores; 0: the device has none
};
const std::vector<GpuPeak>& GpuPeakTable();

// The published dense peak of a CUDA device by its name ("NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-80GB", ...; matched by whole tokens, case-insensitively, the most specific
// row first), for `precision` (UNSPECIFIED = FP32); nullopt when unknown.
std::optional<double> GpuDensePeakFlops(absl::string_view device_name, v1::Precision precision);

struct WorkerPeakInput {
  v1::DeviceKind device = v1::DEVICE_KIND_UNSPECIFIED;
  std::string device_name;            // CUDA
  double core_sgemm_flops_per_s = 0;  // CPU: measured at start-up; 0 = not measured
  int cpu_cores = 0;                  // CPU: usable cores; 0 = unknown
  int compute_threads = 0;            // CPU: BLAS threads; 0 = 1
};

// One worker's peak for a job of `precision`.
PeakFlops WorkerPeakFlops(const WorkerPeakInput& worker, v1::Precision precision);

// The job's peak: the sum of its workers' (each rank computes on its own device), unknown if
// any worker's is.
PeakFlops JobPeakFlops(const std::vector<WorkerPeakInput>& workers, v1::Precision precision);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_DEVICE_PEAKS_H_
