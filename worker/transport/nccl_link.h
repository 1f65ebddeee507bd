// NCCL for a job's tensors, where this build has it: a fresh communicator id (made by the worker
// that will be rank 0, for the coordinator to hand to every rank) and the NCCL transport.
// nccl_link_cuda.cc implements them in a CUDA build; nccl_link_none.cc refuses with a reason, so
// callers need no preprocessor switch.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_WORKER_TRANSPORT_NCCL_LINK_H_
#define PIPETRAIN_WORKER_TRANSPORT_NCCL_LINK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

struct NcclLinkOptions {
  int rank = 0;
  int world_size = 1;
  std::string unique_id;   // NewNcclId() bytes of this launch, the same on every rank
  std::vector<int> peers;  // this rank's pipeline neighbours
  int device = 0;          // CUDA ordinal
  absl::Duration connect_timeout = absl::Seconds(30);  // joining the communicator
  absl::Duration timeout = absl::Seconds(60);          // any one wait for a peer
};

// FailedPrecondition in a build without CUDA and NCCL.
absl::StatusOr<std::string> NewNcclId();
absl::StatusOr<std::unique_ptr<Transport>> ConnectNccl(const NcclLinkOptions& options);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_NCCL_LINK_H_
