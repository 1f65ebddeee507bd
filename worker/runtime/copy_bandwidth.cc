#include "worker/runtime/copy_bandwidth.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::worker {

absl::StatusOr<CopyBandwidth> MeasureCopyBandwidth(kernels::Backend* backend,
                                                   const ActivationCopierOptions& options,
                                                   int64_t bytes, int rounds) {
  if (bytes < static_cast<int64_t>(sizeof(float)) || rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MeasureCopyBandwidth: bytes >= 4 and rounds >= 1 (got ", bytes, ", ",
                     rounds, ")"));
  }
  ActivationCopier copier(backend, options);
  PT_ASSIGN_OR_RETURN(kernels::Tensor t,
                      backend->Zeros({bytes / static_cast<int64_t>(sizeof(float))},
                                     "copy bandwidth probe"));
  std::vector<kernels::Tensor*> slots = {&t};
  int64_t best_d2h = std::numeric_limits<int64_t>::max(), best_h2d = best_d2h;
  for (int r = 0; r < rounds; ++r) {
    PT_ASSIGN_OR_RETURN(auto off, copier.StartOffload(slots, "copy bandwidth probe"));
    PT_RETURN_IF_ERROR(off->Wait());
    copier.ReleaseSource(*off);
    PT_ASSIGN_OR_RETURN(auto rel, copier.StartReload(slots, "copy bandwidth probe", off));
    PT_RETURN_IF_ERROR(rel->Wait());
    best_d2h = std::min(best_d2h, std::max<int64_t>(1, off->end_ns() - off->start_ns()));
    best_h2d = std::min(best_h2d, std::max<int64_t>(1, rel->end_ns() - rel->start_ns()));
  }
  PT_RETURN_IF_ERROR(copier.Drain());
  const double moved = static_cast<double>(t.bytes());
  return CopyBandwidth{moved / (best_d2h * 1e-9), moved / (best_h2d * 1e-9)};
}

}  // namespace pipetrain::worker
