// ModelStageRunner: a StageRunner that runs real GPT chunks (worker/model) on a backend. Stage s
// of an S-stage schedule holds the s-th of S even contiguous splits of the model's blocks
// (model::SplitEvenly), so every schedule and placement computes the same function; with the
// chunks' microbatch-ordered gradient accumulation the weights after each step are bitwise those
// of single-process training, whatever order the schedule runs W in.
//
// Activation bytes are the chunks' stashes (what F keeps for B and W), measured after every
// action, which is exactly what the simulator's memory model predicts.
//
// Thread-safety: not thread-safe (one executor thread).
#ifndef PIPETRAIN_WORKER_RUNTIME_MODEL_STAGE_RUNNER_H_
#define PIPETRAIN_WORKER_RUNTIME_MODEL_STAGE_RUNNER_H_

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "worker/model/gpt_chunk.h"
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
  kernels::AdamWConfig optimizer;
  int num_stages = 1;
  int num_microbatches = 1;
  std::vector<int> stages;  // the stages this worker holds
  MicrobatchSource data;    // needed by the workers holding the first or last stage
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
  absl::Status Offload(int stage, int microbatch) override;
  absl::Status Reload(int stage, int microbatch) override;
  absl::StatusOr<std::optional<double>> EndStep() override;

  int64_t activation_bytes() const override;
  int64_t peak_activation_bytes() const override { return peak_bytes_; }
  void ResetActivationPeak() override { peak_bytes_ = activation_bytes(); }
  int64_t offloaded_bytes() const override { return offloaded_bytes_; }

  // The chunk holding `stage` (null if not on this worker).
  model::GptChunk* chunk(int stage);

 private:
  ModelStageRunner(kernels::Backend* backend, ModelStageConfig config)
      : backend_(backend), config_(std::move(config)) {}
  absl::StatusOr<model::GptChunk*> Chunk(int stage);
  void Measure();

  kernels::Backend* backend_;
  ModelStageConfig config_;
  std::map<int, std::unique_ptr<model::GptChunk>> chunks_;
  std::map<int, MicrobatchData> data_;  // this step's microbatches, fetched on first use
  int step_ = 0;
  std::map<int, double> losses_;  // per microbatch, summed in microbatch order at EndStep
  int64_t peak_bytes_ = 0;
  int64_t offloaded_bytes_ = 0;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_MODEL_STAGE_RUNNER_H_
