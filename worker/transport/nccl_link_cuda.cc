// NCCL of a CUDA build: ids from ncclGetUniqueId, the transport of nccl_transport.h.
#include "common/status_macros.h"
#include "worker/transport/nccl_link.h"
#include "worker/transport/nccl_transport.h"

namespace pipetrain::worker {

absl::StatusOr<std::string> NewNcclId() { return NewNcclUniqueId(); }

absl::StatusOr<std::unique_ptr<Transport>> ConnectNccl(const NcclLinkOptions& options) {
  NcclTransportOptions o;
  o.rank = options.rank;
  o.world_size = options.world_size;
  o.unique_id = options.unique_id;
  o.peers = options.peers;
  o.device = options.device;
  o.connect_timeout = options.connect_timeout;
  o.peer_timeout = options.timeout;
  PT_ASSIGN_OR_RETURN(std::unique_ptr<NcclTransport> transport, NcclTransport::Create(o));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace pipetrain::worker
