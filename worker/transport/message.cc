#include "worker/transport/message.h"

#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace pipetrain::worker {

std::string ToString(const MessageKey& key) {
  const char* role = "gradient";
  if (key.role == TensorRole::kActivation) role = "activation";
  if (key.role == TensorRole::kStepStatus) role = "step status";
  if (key.role == TensorRole::kTiedGradient) role = "tied embedding gradient";
  if (key.role == TensorRole::kReplicaGradient) role = "replica gradient sum";
  if (key.role == TensorRole::kReplicaLoss) role = "replica losses";
  return absl::StrFormat("step %d %s of stage %d microbatch %d", key.step, role, key.stage,
                         key.microbatch);
}

uint64_t PayloadChecksum(const std::vector<float>& data) {
  return XXH3_64bits(data.data(), data.size() * sizeof(float));
}

}  // namespace pipetrain::worker
