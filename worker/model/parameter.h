// Parameter: one trainable tensor of the model with its gradient and AdamW moments, all in the
// backend's (counted) device memory, plus deterministic initialisation: a parameter's values are
// a pure function of (seed, global layer index, parameter name, element index), so any partition
// of the model into chunks produces bitwise the same weights. Each parameter has a kind, which
// decides its weight-decay group (optimizer_settings.h).
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

// What a parameter is, for the optimizer's weight-decay groups.
enum class ParameterKind {
  kLinearWeight,  // the matrix of a linear layer: attention qkv and projection, MLP, LM head
  kEmbedding,     // token (wte) and position (wpe) embedding tables
  kNorm,          // LayerNorm gain (gamma) and shift (beta)
  kBias,          // the bias of a linear layer
};

struct Parameter {
  std::string name;      // e.g. "block.attn.qkv.weight" (unique within its layer)
  int global_layer = 0;  // see GptConfig
  ParameterKind kind = ParameterKind::kLinearWeight;
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
                                        std::string name, ParameterKind kind,
                                        const kernels::Shape& shape, Init init,
                                        float stddev = 0.0f);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_PARAMETER_H_
