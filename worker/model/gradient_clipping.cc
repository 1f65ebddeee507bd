#include "worker/model/gradient_clipping.h"

#include <algorithm>
#include <cmath>

#include "common/status_macros.h"

namespace pipetrain::model {

ClipVerdict DecideClip(double sum_squares, double max_norm) {
  ClipVerdict v;
  v.sum_squares = sum_squares;
  v.norm = std::sqrt(sum_squares);
  v.finite = std::isfinite(sum_squares);
  if (v.finite && max_norm > 0) {
    v.scale = static_cast<float>(std::min(1.0, max_norm / (v.norm + kClipEpsilon)));
    v.clipped = v.scale < 1.0f;
  }
  return v;
}

double AddSquaresLastFirst(const std::vector<double>& squares, double running) {
  for (auto it = squares.rbegin(); it != squares.rend(); ++it) running += *it;
  return running;
}

absl::StatusOr<ClipVerdict> ClipAndStep(GptChunk& chunk, const OptimizerSettings& settings,
                                        int64_t step) {
  PT_RETURN_IF_ERROR(chunk.TieGradients());
  PT_ASSIGN_OR_RETURN(const std::vector<double> squares, chunk.GradientSquares());
  const ClipVerdict verdict =
      DecideClip(AddSquaresLastFirst(squares, 0.0), settings.clip_grad_norm);
  if (!verdict.finite) return verdict;
  if (verdict.clipped) PT_RETURN_IF_ERROR(chunk.ScaleGradients(verdict.scale));
  PT_RETURN_IF_ERROR(chunk.OptimizerStep(settings, step));
  return verdict;
}

}  // namespace pipetrain::model
