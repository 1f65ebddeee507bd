// Which transport carries a job's tensors, from where its ranks compute: NCCL when every rank is
// a CUDA worker on a GPU of its own (distinct host and device ordinal), so that NCCL can own a
// device per rank; otherwise TCP, which stages device tensors through host memory (several ranks
// sharing one GPU, for development, or any CPU rank). With data parallelism the ranks are all
// d x p of the job; NCCL then runs one communicator per replica's pipeline and one per stage
// group across the replicas (common/nccl_groups.h, worker/transport/grouped_transport.h).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COORDINATOR_TRANSPORT_CHOICE_H_
#define PIPETRAIN_COORDINATOR_TRANSPORT_CHOICE_H_

#include <string>
#include <vector>

#include "pipetrain/v1/common.pb.h"

namespace pipetrain::coordinator {

// Where one rank computes, as its worker registered it.
struct RankDevice {
  v1::DeviceKind kind = v1::DEVICE_KIND_CPU;
  std::string host;
  int device_index = 0;
};

v1::TransportKind ChooseTransport(const std::vector<RankDevice>& ranks);

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_TRANSPORT_CHOICE_H_
