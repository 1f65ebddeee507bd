// OptimizerSettings: everything one optimizer step applies besides the gradients: AdamW's
// constants, the learning-rate schedule (model/lr_schedule.h) and the weight-decay groups. The
// reference trainer and every pipeline stage update through GptChunk::OptimizerStep with the
// same settings, so they use the same rate and the same groups at every step.
//
// Weight-decay groups: a linear layer's weight matrix (attention qkv and projection, MLP, LM
// head) decays whenever adamw.weight_decay > 0; embeddings, LayerNorm parameters and biases do
// not, unless their group is switched on (OptimizerSpec.decay_embeddings,
// decay_norms_and_biases).
//
// Thread-safety: plain values and pure functions.
#ifndef PIPETRAIN_WORKER_MODEL_OPTIMIZER_SETTINGS_H_
#define PIPETRAIN_WORKER_MODEL_OPTIMIZER_SETTINGS_H_

#include <cstdint>

#include "kernels/backend.h"
#include "model/lr_schedule.h"
#include "worker/model/parameter.h"

namespace pipetrain::model {

struct WeightDecayGroups {
  bool embeddings = false;        // wte, wpe
  bool norms_and_biases = false;  // LayerNorm gamma and beta, every linear bias
};

struct OptimizerSettings {
  kernels::AdamWConfig adamw;  // lr: the peak learning rate
  LrSchedule lr_schedule;      // default: constant (adamw.lr at every step)
  WeightDecayGroups decay;     // default: linear weights only
  // Gradient clipping by the global norm (gradient_clipping.h); 0 = none.
  double clip_grad_norm = 0;
};

// Whether weight decay applies to a parameter of `kind` under `groups`.
bool DecaysWeight(ParameterKind kind, const WeightDecayGroups& groups);

// AdamW's constants for optimizer step `step` (1-based) on a parameter of `kind`: adamw with lr =
// LearningRate(lr_schedule, adamw.lr, step) as a float, and weight_decay zeroed outside the
// parameter's group.
kernels::AdamWConfig AdamWForStep(const OptimizerSettings& settings, ParameterKind kind,
                                  int64_t step);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_OPTIMIZER_SETTINGS_H_
