// Message: one activation or gradient tensor travelling between two pipeline workers, and the
// key that names it. Host float32 data, row-major.
//
// Thread-safety: value types.
#ifndef PIPETRAIN_WORKER_TRANSPORT_MESSAGE_H_
#define PIPETRAIN_WORKER_TRANSPORT_MESSAGE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::worker {

enum class TensorRole : uint8_t {
  kActivation = 1,  // forward: output of `stage`, input of stage + 1
  kGradient = 2,    // backward: input gradient of `stage`, output gradient of stage - 1
  // End of step: the global gradient norm's partial and complete sums of squares (executor.h);
  // one double as four 16-bit pieces.
  kStepStatus = 3,
  // End of step, tied embeddings split over two ranks: the gradient of one rank's copy of the
  // token embedding, for the other (executor.h).
  kTiedGradient = 4,
  // Data parallelism (worker/runtime/replica_reducer.h): one stage's gradients summed over the
  // step's microbatches so far (microbatch 0: the running sum for the next replica; 1: the sum
  // over every microbatch, for all replicas), all parameters flat.
  kReplicaGradient = 5,
  // Data parallelism: one replica's per-microbatch losses for replica 0 (doubles as in
  // kStepStatus, microbatch = the sending replica).
  kReplicaLoss = 6,
};

struct MessageKey {
  int32_t step = 0;
  int32_t stage = 0;  // the producing stage
  int32_t microbatch = 0;
  TensorRole role = TensorRole::kActivation;

  friend bool operator==(const MessageKey&, const MessageKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const MessageKey& k) {
    return H::combine(std::move(h), k.step, k.stage, k.microbatch, static_cast<int>(k.role));
  }
};

// "step 3 activation of stage 2 microbatch 5".
std::string ToString(const MessageKey& key);

struct Message {
  MessageKey key;
  std::vector<int64_t> shape;
  std::vector<float> data;  // product(shape) elements

  int64_t bytes() const { return static_cast<int64_t>(data.size() * sizeof(float)); }
};

// 64-bit checksum of the payload (XXH3), used to detect corruption in transit.
uint64_t PayloadChecksum(const std::vector<float>& data);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_MESSAGE_H_
