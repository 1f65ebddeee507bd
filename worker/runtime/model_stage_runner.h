// ModelStageRunner: a StageRunner that runs real GPT chunks (worker/model) on a backend. Stage s
// of an S-stage schedule holds the s-th of S even contiguous splits of the model's blocks
// (model::SplitEvenly), so every schedule and placement computes the same function; with the
// chunks' microbatch-ordered gradient accumulation the weights after each step are bitwise those
// of single-process training, whatever order the schedule runs W in.
//
// Activation bytes are the chunks' device-resident stashes (what F keeps for B and W) plus
// offloaded device copies not yet released (activation_copier.h), measured after every action,
// which is exactly what the simulator's memory model predicts.
//
// OFFLOAD/RELOAD are asynchronous: they move the stash's tensors through this runner's
// ActivationCopier (the backend's copy engines on its copy threads) and return at once; the
// microbatch's next B/W/BW waits for the RELOAD copy only if it has not finished. The chunk
// itself is never touched off the executor thread: the copier swaps the stash's Tensor objects
// on this thread (slots from GptChunk::ForEachStashedTensor) and its threads copy only raw
// memory (activation_copier.h).
// The chunk's own synchronous Offload/Reload are not used, so GptChunk::IsOffloaded stays
// false; this runner's OffloadTable is the authority on what is off the device.
//
// Optimizer: EndStep applies every held chunk's AdamW step at the schedule's rate for the step
// (model/lr_schedule.h), with the gradients scaled by the clip coefficient, or skips it
// (non-finite gradients on some rank), as the step's global gradient norm decides
// (worker/model/gradient_clipping.h). A skipped step still counts as an optimizer step, so the
// schedule and AdamW's t stay aligned with the step number, and a resumed run continues both
// from the checkpoint's.
// Post-validation (executor.h): a worker that does not hold stage 0 ends its step knowing only a
// partial sum of squares, a lower bound of the global one. From it, EndStep
//   - partial sum not finite: the step is certain to be skipped; nothing to do;
//   - partial sum already clipped: the step is certain to be clipped, by a coefficient not yet
//     known; the update is deferred to SettleUpdate (no copy needed);
//   - otherwise (the common case): copies every held chunk's values and AdamW moments
//     (GptChunk::SaveOptimizerState; 3 floats per parameter, allocated once and kept) and
//     updates unclipped. SettleUpdate keeps that update when the verdict is "finite, not
//     clipped"; else it restores the copy (a rollback) and redoes the step scaled, or skips it.
// The gradients stay untouched until SettleUpdate, which the executor calls before the next
// BeginStep zeroes them. Either way the weights after SettleUpdate are bitwise those of the
// update the complete verdict asks for.
//
// Tied embeddings: SumGradientSquares first sums the gradients of the two copies of the token
// embedding when this worker holds both (one chunk, or stage 0 and the last stage of a V);
// across two workers the executor exchanges them (TiedGradient, AddTiedGradient).
//
// Validation (executor.h, RunValidation): ValidationForward runs a chunk's F on a validation
// microbatch and drops its stash at once (GptChunk::Discard); EndValidation sums the losses in
// microbatch order, loss / M each, the reference trainer's arithmetic (ReferenceTrainer::
// Validate), so the pipelined validation loss is bitwise the single-process one.
//
// Checkpoints: SaveCheckpoint writes every held stage's chunk to
// <dir>/step-<N>/stage-<s>.ckpt (model/checkpoint_layout.h) between steps; LoadCheckpoint, before the
// first step of a resumed run, loads them and takes the AdamW step count from the files. The data
// position needs no saving: a microbatch is a pure function of (seed, step, microbatch).
//
// Thread-safety: not thread-safe (one executor thread).
#ifndef PIPETRAIN_WORKER_RUNTIME_MODEL_STAGE_RUNNER_H_
#define PIPETRAIN_WORKER_RUNTIME_MODEL_STAGE_RUNNER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/model/gpt_chunk.h"
#include "worker/runtime/activation_copier.h"
#include "worker/runtime/offload_table.h"
#include "worker/runtime/stage_runner.h"

namespace pipetrain::worker {

// Token ids and next-token targets of one microbatch (microbatch_size * seq_len each).
struct MicrobatchData {
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
};
using MicrobatchSource = std::function<absl::StatusOr<MicrobatchData>(int step, int microbatch)>;

struct ModelStageConfig {
  model::GptConfig model;
  model::ChunkOptions chunk;
  model::OptimizerSettings optimizer;  // a job's: OptimizerSettingsOf(spec)
  int num_stages = 1;
  int num_microbatches = 1;  // of the whole step (all data-parallel replicas together)
  // Data parallelism: the step's index of this replica's microbatch 0 (replica r of d: r x the
  // plan's microbatch count). The plan's microbatch mb is the step's mb + offset: its data,
  // its chunk id (ordered accumulation) and its loss's place all use that index.
  int microbatch_offset = 0;
  std::vector<int> stages;  // the stages this worker holds
  MicrobatchSource data;    // needed by the workers holding the first or last stage
  // Validation passes: (completed steps, validation microbatch) -> its data, for the same
  // workers; unset when the job does not evaluate.
  MicrobatchSource validation_data;
  int validation_batches = 0;  // microbatches per validation pass (eval.batches)
  // Copy thread bandwidth cap for OFFLOAD/RELOAD in bytes/s (0 = memcpy speed).
  double copy_bandwidth_bytes_per_s = 0;
};

class ModelStageRunner final : public StageRunner {
 public:
  static absl::StatusOr<std::unique_ptr<ModelStageRunner>> Create(kernels::Backend* backend,
                                                                  ModelStageConfig config);

  kernels::Backend& backend() override { return *backend_; }
  absl::Status BeginStep(int step) override;
  absl::StatusOr<kernels::Tensor> Forward(int stage, int microbatch,
                                          kernels::Tensor input) override;
  absl::StatusOr<kernels::Tensor> BackwardInput(int stage, int microbatch,
                                                kernels::Tensor grad_output) override;
  absl::Status BackwardWeight(int stage, int microbatch) override;
  absl::StatusOr<kernels::Tensor> Backward(int stage, int microbatch,
                                           kernels::Tensor grad_output) override;
  absl::Status Offload(int stage, int microbatch, bool explicit_release = false) override;
  absl::Status Reload(int stage, int microbatch) override;
  absl::Status Release(int stage, int microbatch) override;
  bool ties_embeddings() const override { return config_.model.tie_embeddings; }
  absl::StatusOr<std::vector<float>> TiedGradient() override;
  absl::Status AddTiedGradient(const std::vector<float>& other) override;
  absl::StatusOr<bool> SumGradientSquares() override;
  absl::StatusOr<double> AddGradientSquares(int stage, double running) override;
  absl::StatusOr<StepEnd> EndStep(std::optional<GradientNormPart> norm) override;
  absl::Status SettleUpdate(double sum_squares) override;
  absl::StatusOr<std::vector<float>> StageGradients(int stage) override;
  absl::Status ResumeStageGradients(int stage, absl::Span<const float> sum,
                                    int next_microbatch) override;
  std::map<int, double> TakeStepLosses() override;
  void AddStepLosses(const std::map<int, double>& losses) override;
  absl::Status BeginValidation(int completed_steps) override;
  absl::StatusOr<kernels::Tensor> ValidationForward(int stage, int microbatch,
                                                    kernels::Tensor input) override;
  absl::StatusOr<std::optional<double>> EndValidation() override;

  int64_t activation_bytes() const override;
  int64_t peak_activation_bytes() const override { return peak_bytes_; }
  void ResetActivationPeak() override { peak_bytes_ = activation_bytes(); }
  int64_t offloaded_bytes() const override { return offloaded_bytes_; }

  // The chunk holding `stage` (null if not on this worker).
  model::GptChunk* chunk(int stage);

  // Between steps, after `step` completed steps (N = step): writes every held stage's chunk to
  // <dir>/step-<step>/stage-<s>.ckpt atomically.
  absl::Status SaveCheckpoint(const std::string& dir, int64_t step);
  // Before the first step: loads <dir>/step-<step>/stage-<s>.ckpt into every held stage. The
  // files' optimizer step count must equal `step` (else FailedPrecondition); AdamW continues from
  // it. A failure names the file.
  absl::Status LoadCheckpoint(const std::string& dir, int64_t step);
  // AdamW steps applied so far (from the checkpoint, or the first step's index, plus steps run).
  int64_t optimizer_steps() const { return optimizer_steps_; }

  // How this worker's updates went under post-validation (file comment).
  struct UpdateCounts {
    int64_t final_at_step_end = 0;  // the complete sum was known (this worker holds stage 0)
    int64_t speculated = 0;         // updated unclipped with a copy kept
    int64_t rolled_back = 0;        // of those: restored and redone scaled, or skipped
    int64_t deferred = 0;           // certain to be clipped: updated at SettleUpdate
    int64_t skipped_early = 0;      // certain to be skipped at the step's end
  };
  const UpdateCounts& update_counts() const { return update_counts_; }

  // Copy-engine counters and the time compute spent waiting for late reloads.
  CopierStats copier_stats() const { return copier_.stats(); }
  int64_t reload_wait_ns() const { return offloads_.wait_ns(); }

 private:
  ModelStageRunner(kernels::Backend* backend, ModelStageConfig config)
      : backend_(backend),
        config_(std::move(config)),
        copier_(backend, BackendCopierOptions(config_.copy_bandwidth_bytes_per_s)) {}
  absl::StatusOr<model::GptChunk*> Chunk(int stage);
  // The stage's chunk, once a pending RELOAD of (stage, microbatch) has landed.
  absl::StatusOr<model::GptChunk*> ResidentChunk(int stage, int microbatch, const char* action);
  // The stashed tensors of the plan's `microbatch` (its chunk id: Global).
  absl::StatusOr<std::vector<kernels::Tensor*>> Slots(model::GptChunk* c, int microbatch);
  // The plan's microbatch as the step's (ModelStageConfig::microbatch_offset).
  int Global(int microbatch) const { return config_.microbatch_offset + microbatch; }
  void Measure();
  // FailedPrecondition naming the stage when a chunk still holds a microbatch's stash (its W or
  // BW did not run this step).
  absl::Status CheckNoneInFlight();
  // After every compute action: measure, then free the device copies of finished offloads.
  void ComputeEnded(bool forward);
  // The tied matrix's parameter this worker holds when the other copy is on another worker.
  absl::StatusOr<model::Parameter*> RemoteTiedParameter();
  // Every held chunk's AdamW step optimizer_steps_, gradients scaled first unless scale == 1.
  absl::Status ApplyUpdate(float scale);

  enum class OpenUpdate { kNone, kSpeculated, kDeferred, kSkipped };

  kernels::Backend* backend_;
  ModelStageConfig config_;
  std::map<int, std::unique_ptr<model::GptChunk>> chunks_;
  std::map<int, MicrobatchData> data_;  // this step's microbatches, fetched on first use
  int step_ = 0;
  // AdamW steps applied; set by LoadCheckpoint or, failing that, by the first BeginStep.
  int64_t optimizer_steps_ = 0;
  bool optimizer_steps_known_ = false;
  std::map<int, double> losses_;  // per step microbatch (Global), summed in microbatch order at EndStep
  // The validation pass in progress: its data (fetched on first use) and losses.
  int validation_step_ = 0;
  std::map<int, MicrobatchData> validation_inputs_;
  std::map<int, double> validation_losses_;
  std::map<int, std::vector<double>> grad_squares_;  // per held stage, this step's terms
  OpenUpdate open_update_ = OpenUpdate::kNone;
  std::map<int, std::vector<kernels::Tensor>> saved_state_;  // per held stage (kSpeculated)
  UpdateCounts update_counts_;
  int64_t peak_bytes_ = 0;
  int64_t offloaded_bytes_ = 0;
  // Declared after chunks_: destroyed first, so every copy into a stash finishes before it dies.
  ActivationCopier copier_;
  OffloadTable offloads_{&copier_};
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_MODEL_STAGE_RUNNER_H_
