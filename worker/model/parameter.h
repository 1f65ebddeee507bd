// Parameter: one trainable tensor of the model with its gradient and AdamW moments, all in the
// backend's (counted) device memory, plus deterministic initialisation: a parameter's values are
// a pure function of (seed, global layer index, parameter name, element index), so any partition
// of the model into chunks produces bitwise the same weights.
// Thread-safety: plain data; owned and driven by one chunk.
#ifndef PIPETRAIN_WORKER_MODEL_PARAMETER_H_
#define PIPETRAIN_WORKER_MODEL_PARAMETER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace pipetrain::model {

enum class Init { kZeros, kOnes, kNormal };

struct Parameter {
  std::string name;      // e.g. "block.attn.qkv.weight" (unique within its layer)
  int global_layer = 0;  // see GptConfig
  bool weight_decay = false;
  kernels::Tensor value;
  kernels::Tensor grad;    // accumulated over the microbatches of a step
  kernels::Tensor adam_m;  // first moment
  kernels::Tensor adam_v;  // second moment
};

// The `count` initial values of a kNormal parameter: N(0, stddev^2) from a counter-based
// generator keyed by (seed, global_layer, name).
std::vector<float> NormalValues(uint64_t seed, int global_layer, const std::string& name,
                                int64_t count, float stddev);

// Allocates value/grad/moments (grad and moments zeroed) and initialises value.
absl::StatusOr<Parameter> MakeParameter(kernels::Backend* backend, uint64_t seed, int global_layer,
                                        std::string name, const kernels::Shape& shape, Init init,
                                        float stddev = 0.0f, bool weight_decay = false);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_PARAMETER_H_
