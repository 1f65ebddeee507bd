// Starting a model from an exported file (`model.init_from`, docs/export.md): copies the values
// of a chunk's parameters out of a safetensors file written by `pipetrain export`
// (model/exported_model.h gives the names and the one transposed tensor). Only the chunk's own
// tensors are read (the file is mapped, so a worker holding two blocks of forty touches only
// those bytes). AdamW moments are left as they are (zero on a new chunk) and gradients zeroed:
// the run starts at step 1 with these weights.
//
// Thread-safety: free functions; the chunk must not be in use.
#ifndef PIPETRAIN_WORKER_MODEL_EXPORTED_WEIGHTS_H_
#define PIPETRAIN_WORKER_MODEL_EXPORTED_WEIGHTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/safetensors.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model {

// Loads every parameter of `chunk` from `file`. Checks all of them before changing any:
// InvalidArgument, starting with `field` and the file, for a missing tensor or one whose shape
// differs from the chunk's (naming the tensor and both shapes).
absl::Status LoadExportedWeights(const SafetensorsFile& file, GptChunk& chunk,
                                 const std::string& field = "model.init_from");

// Opens `path` and loads it into each of `chunks`; errors start with `field`.
absl::Status LoadExportedWeights(const std::string& path, absl::Span<GptChunk* const> chunks,
                                 const std::string& field = "model.init_from");

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_EXPORTED_WEIGHTS_H_
