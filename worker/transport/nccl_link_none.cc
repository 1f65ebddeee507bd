// NCCL of a build without CUDA: refused with the reason.
#include "worker/transport/nccl_link.h"

namespace pipetrain::worker {
namespace {

absl::Status NoNccl() {
  return absl::FailedPreconditionError(
      "this pipetrain-worker was built without CUDA and NCCL (PIPETRAIN_ENABLE_CUDA=OFF)");
}

}  // namespace

absl::StatusOr<std::string> NewNcclId() { return NoNccl(); }

absl::StatusOr<std::unique_ptr<Transport>> ConnectNccl(const NcclLinkOptions&) { return NoNccl(); }

}  // namespace pipetrain::worker
