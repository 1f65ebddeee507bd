#include "worker/model/optimizer_settings.h"

namespace pipetrain::model {

bool DecaysWeight(ParameterKind kind, const WeightDecayGroups& groups) {
  switch (kind) {
    case ParameterKind::kLinearWeight:
      return true;
    case ParameterKind::kEmbedding:
      return groups.embeddings;
    case ParameterKind::kNorm:
    case ParameterKind::kBias:
      return groups.norms_and_biases;
  }
  return false;
}

kernels::AdamWConfig AdamWForStep(const OptimizerSettings& settings, ParameterKind kind,
                                  int64_t step) {
  kernels::AdamWConfig c = settings.adamw;
  c.lr = static_cast<float>(LearningRate(settings.lr_schedule, settings.adamw.lr, step));
  if (!DecaysWeight(kind, settings.decay)) c.weight_decay = 0.0f;
  return c;
}

}  // namespace pipetrain::model
