// Gradient clipping by the global norm, defined so that any split of the model into pipeline
// stages computes it bit for bit like one process holding the whole model:
//   1. each parameter's squared gradient elements are summed in element order into a double
//      (Backend::SumOfSquares);
//   2. those per-parameter sums are added into one double that starts at 0, from the model's
//      LAST parameter to its first (the reverse of GptChunk::parameters() over the whole model).
// Step 2 is a running sum, so a pipeline computes it by handing the partial sum from the rank of
// the last stage down the stage chain to the rank of stage 0 (worker/runtime/executor.h); it runs
// in that direction because the rank of stage 0 is the one that must know the verdict first (it
// starts the next step). The norm is sqrt(sum), and the step's update is
//   not finite (a NaN or Inf in any gradient): skipped;
//   else: gradients multiplied by scale = (float) min(1, max_norm / (norm + 1e-6)) (PyTorch's
//         clip_grad_norm_ coefficient), then the AdamW step. max_norm = 0 means no clipping
//         (scale 1). The multiply is left out when scale == 1, where it changes nothing.
// Squares of float gradients cannot overflow a double, so a non-finite sum means a non-finite
// gradient: the same sum also decides the skip (docs/training.md).
//
// Thread-safety: pure functions; ClipAndStep drives one chunk (not thread-safe).
#ifndef PIPETRAIN_WORKER_MODEL_GRADIENT_CLIPPING_H_
#define PIPETRAIN_WORKER_MODEL_GRADIENT_CLIPPING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/gpt_chunk.h"
#include "worker/model/optimizer_settings.h"

namespace pipetrain::model {

// PyTorch's epsilon in the clip coefficient.
inline constexpr double kClipEpsilon = 1e-6;

// What one step's optimizer update does, decided from the global sum of squared gradients.
struct ClipVerdict {
  double sum_squares = 0;
  double norm = 0;       // sqrt(sum_squares); NaN or Inf when a gradient was not finite
  bool finite = true;    // false: the update is skipped
  float scale = 1.0f;    // what every gradient is multiplied by before AdamW (1: unchanged)
  bool clipped = false;  // scale < 1
};

// The verdict for `sum_squares` under clip_grad_norm = `max_norm` (0: no clipping).
ClipVerdict DecideClip(double sum_squares, double max_norm);

// `running` plus `squares` (per parameter, in parameters() order) from the last to the first.
double AddSquaresLastFirst(const std::vector<double>& squares, double running);

// The whole optimizer step of a chunk that holds the whole model (the reference trainer): tied
// embeddings' gradients summed (GptChunk::TieGradients), the verdict from the chunk's own
// gradients, then the scaled AdamW step `step` unless it skips.
absl::StatusOr<ClipVerdict> ClipAndStep(GptChunk& chunk, const OptimizerSettings& settings,
                                        int64_t step);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_GRADIENT_CLIPPING_H_
