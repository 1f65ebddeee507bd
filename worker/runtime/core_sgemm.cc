#include "worker/runtime/core_sgemm.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"

namespace pipetrain::worker {

absl::StatusOr<double> MeasureCoreSgemmFlops(const CoreSgemmOptions& options) {
  if (options.n < 16 || options.max_rounds < 1) {
    return absl::InvalidArgumentError("core sgemm probe: n >= 16 and max_rounds >= 1");
  }
  double best_s = 0;
  {
    kernels::CpuBackend backend(kernels::CpuBackendOptions{.blas_threads = 1});
    const int64_t n = options.n;
    std::vector<float> values(static_cast<size_t>(n * n));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17) / 17.0f;
    PT_ASSIGN_OR_RETURN(kernels::Tensor a, backend.Empty({n, n}, "sgemm probe a"));
    PT_ASSIGN_OR_RETURN(kernels::Tensor b, backend.Empty({n, n}, "sgemm probe b"));
    PT_ASSIGN_OR_RETURN(kernels::Tensor c, backend.Empty({n, n}, "sgemm probe c"));
    PT_RETURN_IF_ERROR(backend.Upload(values, &a));
    PT_RETURN_IF_ERROR(backend.Upload(values, &b));
    PT_RETURN_IF_ERROR(backend.Gemm(a, false, b, false, 1.0f, 0.0f, &c));  // warm-up
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::nanoseconds(absl::ToInt64Nanoseconds(options.budget));
    for (int round = 0; round < options.max_rounds; ++round) {
      const auto start = std::chrono::steady_clock::now();
      PT_RETURN_IF_ERROR(backend.Gemm(a, false, b, false, 1.0f, 0.0f, &c));
      const auto end = std::chrono::steady_clock::now();
      const double s = std::chrono::duration<double>(end - start).count();
      if (s > 0 && (best_s == 0 || s < best_s)) best_s = s;
      if (end >= deadline) break;
    }
  }
  // CpuBackend's constructor sets OpenBLAS's (process-wide) thread count: put the worker's back.
  kernels::CpuBackend restore(
      kernels::CpuBackendOptions{.blas_threads = std::max(1, options.restore_blas_threads)});
  if (!(best_s > 0)) return absl::InternalError("core sgemm probe: no measurable round");
  const double n = options.n;
  return 2.0 * n * n * n / best_s;
}

}  // namespace pipetrain::worker
