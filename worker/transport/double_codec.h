// Doubles in a float message: each double travels as its 64 bits in four 16-bit pieces, each
// exactly representable as a float, so no NaN payload or rounding can change it on the way.
// Used for the end-of-step sums of squares (executor.h) and the replicas' losses
// (worker/runtime/replica_reducer.h).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_WORKER_TRANSPORT_DOUBLE_CODEC_H_
#define PIPETRAIN_WORKER_TRANSPORT_DOUBLE_CODEC_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/transport/message.h"

namespace pipetrain::worker {

// Four floats per value, in order.
std::vector<float> EncodeDoubles(absl::Span<const double> values);

// The values of a message EncodeDoubles wrote; DataLoss naming the key when the payload is not
// a whole number of pieces or a piece is not an integer in 0..65535.
absl::StatusOr<std::vector<double>> DecodeDoubles(const Message& message);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_DOUBLE_CODEC_H_
