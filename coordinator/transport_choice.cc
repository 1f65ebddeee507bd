#include "coordinator/transport_choice.h"

#include <set>
#include <utility>

namespace pipetrain::coordinator {

v1::TransportKind ChooseTransport(const std::vector<RankDevice>& ranks) {
  // One rank moves nothing; NCCL would only add a communicator.
  if (ranks.size() < 2) return v1::TRANSPORT_KIND_TCP;
  std::set<std::pair<std::string, int>> gpus;
  for (const RankDevice& r : ranks) {
    if (r.kind != v1::DEVICE_KIND_CUDA || r.host.empty()) return v1::TRANSPORT_KIND_TCP;
    if (!gpus.emplace(r.host, r.device_index).second) return v1::TRANSPORT_KIND_TCP;
  }
  return v1::TRANSPORT_KIND_NCCL;
}

}  // namespace pipetrain::coordinator
