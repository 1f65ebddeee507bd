// StageRunner: the compute side of one worker, as the executor sees it. It owns the stages
// (chunks) placed on this worker and everything they store between F and W; the executor owns
// the order (the action list) and the movement of tensors between stages and workers.
//
// Two implementations: ModelStageRunner (real GPT chunks on a kernels::Backend) and
// EmulatedStageRunner (waits for the cost model's time instead of computing; for scale tests,
// never the default). Both allocate what a stage stores through the backend's device allocator,
// so the bytes they report are bytes really held.
//
// Thread-safety: driven by one executor thread; not thread-safe.
#ifndef PIPETRAIN_WORKER_RUNTIME_STAGE_RUNNER_H_
#define PIPETRAIN_WORKER_RUNTIME_STAGE_RUNNER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/tensor.h"
#include "worker/model/gradient_clipping.h"

namespace pipetrain::worker {

// What a worker knows of a step's global sum of squared gradients when its part of the
// exchange is done (executor.h).
struct GradientNormPart {
  double sum_squares = 0;  // over the stages from the last one down to this worker's lowest
  bool complete = false;   // covers every stage (this worker holds stage 0)
};

struct StepEnd {
  std::optional<double> loss;  // the worker holding the last stage
  // With a complete sum: the step's verdict (norm, clipped, skipped).
  std::optional<model::ClipVerdict> verdict;
};

class StageRunner {
 public:
  virtual ~StageRunner() = default;

  virtual kernels::Backend& backend() = 0;

  // Called before the first action of a step.
  virtual absl::Status BeginStep(int step) = 0;
  // F of (stage, microbatch). `input` is the activation from stage - 1 (empty for stage 0,
  // which reads its own data). Returns the activation for stage + 1 (empty for the last stage).
  virtual absl::StatusOr<kernels::Tensor> Forward(int stage, int microbatch,
                                                  kernels::Tensor input) = 0;
  // B: input gradient from the output gradient (empty for the last stage, whose loss is local).
  // Returns the gradient for stage - 1 (empty for stage 0). Keeps what W needs.
  virtual absl::StatusOr<kernels::Tensor> BackwardInput(int stage, int microbatch,
                                                        kernels::Tensor grad_output) = 0;
  // W: accumulates the weight gradients and frees what B kept.
  virtual absl::Status BackwardWeight(int stage, int microbatch) = 0;
  // BW: B and W fused.
  virtual absl::StatusOr<kernels::Tensor> Backward(int stage, int microbatch,
                                                   kernels::Tensor grad_output) = 0;
  // Moves what F(stage, microbatch) stored to host memory / back to the device. The device copy
  // an OFFLOAD reads from is freed at the next compute end, or, with `explicit_release` (the
  // plan has a RELEASE for it), by Release.
  virtual absl::Status Offload(int stage, int microbatch, bool explicit_release = false) = 0;
  virtual absl::Status Reload(int stage, int microbatch) = 0;
  // RELEASE: waits for the stash's offload copy and frees its device copy.
  virtual absl::Status Release(int stage, int microbatch) = 0;
  // Tied embeddings (model.tie_embeddings) whose embedding (stage 0) and head (the last stage)
  // sit on two workers: each sends the gradient of its copy of the shared matrix to the other
  // (TiedGradient) and adds the other's (AddTiedGradient), before SumGradientSquares; both then
  // hold the same sum (float addition commutes). Runners without the tie keep the defaults.
  virtual bool ties_embeddings() const { return false; }
  virtual absl::StatusOr<std::vector<float>> TiedGradient() {
    return absl::FailedPreconditionError("this runner does not tie embeddings");
  }
  virtual absl::Status AddTiedGradient(const std::vector<float>& /*other*/) {
    return absl::FailedPreconditionError("this runner does not tie embeddings");
  }
  // After the step's last action: computes the squared-gradient terms of every held stage
  // (worker/model/gradient_clipping.h). False for a runner that keeps no gradients (emulated
  // compute), which then takes no part in the gradient-norm exchange (executor.h). All ranks of
  // a pipeline run the same kind of runner.
  virtual absl::StatusOr<bool> SumGradientSquares() = 0;
  // `running` plus the terms of `stage` (held here), its last parameter first.
  virtual absl::StatusOr<double> AddGradientSquares(int stage, double running) = 0;
  // Then the optimizer step, with what this worker knows of the step's global sum of squared
  // gradients (nullopt when SumGradientSquares returned false). With the complete sum the
  // update is final; with a partial one the runner decides as the executor's file comment says
  // and holds the update open until SettleUpdate. Returns the step's loss (mean over
  // microbatches) if this worker holds the last stage, and the verdict with the complete sum.
  virtual absl::StatusOr<StepEnd> EndStep(std::optional<GradientNormPart> norm) = 0;
  // The step's complete sum of squared gradients, for the update EndStep held open; called
  // before the next BeginStep (and before weights are read or saved).
  virtual absl::Status SettleUpdate(double sum_squares) = 0;

  // ---- Data parallelism (replica_reducer.h); runners without gradients keep the defaults ----
  // `stage`'s gradients summed over this step's microbatches so far, every parameter flat.
  virtual absl::StatusOr<std::vector<float>> StageGradients(int /*stage*/) {
    return absl::UnimplementedError("this runner keeps no gradients to sum across replicas");
  }
  // `sum` is `stage`'s gradients summed in order over the step's microbatches
  // 0..next_microbatch-1 (the earlier replicas'): this runner's own microbatches of the stage
  // are added to it in order (model::GptChunk::ResumeGradientsAt). With next_microbatch = the
  // step's microbatch count it simply installs the complete sum.
  virtual absl::Status ResumeStageGradients(int /*stage*/, absl::Span<const float> /*sum*/,
                                            int /*next_microbatch*/) {
    return absl::UnimplementedError("this runner keeps no gradients to sum across replicas");
  }
  // The losses of this step's microbatches scored here (by their index in the step's whole
  // batch), removed from the runner; AddStepLosses adds another replica's, so the runner of
  // replica 0 reports the loss of the whole batch.
  virtual std::map<int, double> TakeStepLosses() { return {}; }
  virtual void AddStepLosses(const std::map<int, double>& /*losses*/) {}

  // ---- Validation passes (a forward-only plan; executor.h, RunValidation) ----
  // Called before the pass's first action, once `completed_steps` training steps are done.
  virtual absl::Status BeginValidation(int completed_steps) = 0;
  // F of (stage, validation microbatch) that keeps nothing for a backward: the stage that reads
  // data reads data::ValidationMicrobatch(microbatch); the last stage records the loss.
  virtual absl::StatusOr<kernels::Tensor> ValidationForward(int stage, int microbatch,
                                                            kernels::Tensor input) = 0;
  // After the pass's last action: its mean loss over the microbatches, in microbatch order, if
  // this worker holds the last stage (and computes losses).
  virtual absl::StatusOr<std::optional<double>> EndValidation() = 0;

  // Activation bytes stored right now (what the simulator's memory model predicts), and the
  // peak since the last ResetActivationPeak.
  virtual int64_t activation_bytes() const = 0;
  virtual int64_t peak_activation_bytes() const = 0;
  virtual void ResetActivationPeak() = 0;
  virtual int64_t offloaded_bytes() const = 0;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_STAGE_RUNNER_H_
