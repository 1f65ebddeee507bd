// Shared fixtures for the runtime's training tests (exactness, offload, checkpoint resume): a
// small GPT, a deterministic synthetic data stream, the optimizer settings (constant, and the
// full recipe: warmup + cosine + every decay group), a weight dump for bitwise comparisons, and
// a forwarding StageRunner for tests that change one call.
#ifndef PIPETRAIN_TESTS_RUNTIME_TRAINING_FIXTURES_H_
#define PIPETRAIN_TESTS_RUNTIME_TRAINING_FIXTURES_H_

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/gpt_config.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "worker/model/gpt_chunk.h"
#include "worker/runtime/model_stage_runner.h"
#include "worker/runtime/stage_runner.h"

namespace pipetrain::worker::testing {

inline constexpr int kMicrobatchSize = 2;

// hidden 32, 4 heads, ffn 64, seq_len 8, vocab 24.
model::GptConfig SmallModel(int layers);
// Pseudo-random tokens per (step, microbatch); the target is a fixed function of the token.
MicrobatchSource Data(const model::GptConfig& config);
kernels::AdamWConfig Adam();
// Adam() with a 2-step warmup, cosine decay over 4 steps to 0.1 x the peak, weight decay on the
// embeddings, norms and biases too: steps 1..4 run at peak/2, peak, mid-cosine, the floor.
model::OptimizerSettings Recipe();
// Adam() at a constant rate with the default decay groups.
model::OptimizerSettings Constant();
// The single-process reference's gradient pass of one step: microbatches 0..m-1 of `data` in
// order through `chunk` (the whole model), forward and fused backward, each loss scaled by 1/m;
// returns the step's mean loss. The caller zeroes the gradients before and steps after.
absl::StatusOr<double> AccumulateWholeBatch(model::GptChunk& chunk, const MicrobatchSource& data,
                                            int step, int m);
// Every parameter value of `chunk`, in parameters() order.
std::vector<std::vector<float>> Weights(kernels::Backend& backend, model::GptChunk& chunk);

// The cost model of `plan` with unit times and the model's exact stash bytes per stage
// (bytes_per_unit = 1), so Simulate predicts peak activation bytes.
absl::StatusOr<schedule::CostModel> ExactByteCosts(const schedule::Schedule& plan,
                                                   const model::GptConfig& config);

// One CPU backend and ModelStageRunner per worker of `plan`, training `config` on Data().
struct ModelWorkers {
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<ModelStageRunner>> runners;
  std::vector<StageRunner*> raw;  // for RunInProcess
};
absl::StatusOr<ModelWorkers> MakeModelWorkers(
    const schedule::Schedule& plan, const model::GptConfig& config, int microbatches,
    double copy_bandwidth_bytes_per_s = 0, const model::OptimizerSettings& optimizer = Constant());

// Forwards every call to `inner` (not owned); a test overrides the calls it changes.
class ForwardingStageRunner : public StageRunner {
 public:
  explicit ForwardingStageRunner(StageRunner* inner) : inner_(inner) {}
  kernels::Backend& backend() override { return inner_->backend(); }
  absl::Status BeginStep(int step) override { return inner_->BeginStep(step); }
  absl::StatusOr<kernels::Tensor> Forward(int stage, int mb, kernels::Tensor input) override {
    return inner_->Forward(stage, mb, std::move(input));
  }
  absl::StatusOr<kernels::Tensor> BackwardInput(int stage, int mb,
                                                kernels::Tensor grad_output) override {
    return inner_->BackwardInput(stage, mb, std::move(grad_output));
  }
  absl::Status BackwardWeight(int stage, int mb) override {
    return inner_->BackwardWeight(stage, mb);
  }
  absl::StatusOr<kernels::Tensor> Backward(int stage, int mb,
                                           kernels::Tensor grad_output) override {
    return inner_->Backward(stage, mb, std::move(grad_output));
  }
  absl::Status Offload(int stage, int mb, bool explicit_release) override {
    return inner_->Offload(stage, mb, explicit_release);
  }
  absl::Status Reload(int stage, int mb) override { return inner_->Reload(stage, mb); }
  absl::Status Release(int stage, int mb) override { return inner_->Release(stage, mb); }
  bool ties_embeddings() const override { return inner_->ties_embeddings(); }
  absl::StatusOr<std::vector<float>> TiedGradient() override { return inner_->TiedGradient(); }
  absl::Status AddTiedGradient(const std::vector<float>& other) override {
    return inner_->AddTiedGradient(other);
  }
  absl::StatusOr<bool> SumGradientSquares() override { return inner_->SumGradientSquares(); }
  absl::StatusOr<double> AddGradientSquares(int stage, double running) override {
    return inner_->AddGradientSquares(stage, running);
  }
  absl::StatusOr<StepEnd> EndStep(std::optional<GradientNormPart> norm) override {
    return inner_->EndStep(norm);
  }
  absl::Status SettleUpdate(double sum_squares) override {
    return inner_->SettleUpdate(sum_squares);
  }
  absl::Status BeginValidation(int completed_steps) override {
    return inner_->BeginValidation(completed_steps);
  }
  absl::StatusOr<kernels::Tensor> ValidationForward(int stage, int mb,
                                                    kernels::Tensor input) override {
    return inner_->ValidationForward(stage, mb, std::move(input));
  }
  absl::StatusOr<std::optional<double>> EndValidation() override {
    return inner_->EndValidation();
  }
  int64_t activation_bytes() const override { return inner_->activation_bytes(); }
  int64_t peak_activation_bytes() const override { return inner_->peak_activation_bytes(); }
  void ResetActivationPeak() override { inner_->ResetActivationPeak(); }
  int64_t offloaded_bytes() const override { return inner_->offloaded_bytes(); }

 protected:
  StageRunner* inner_;
};

}  // namespace pipetrain::worker::testing

#endif  // PIPETRAIN_TESTS_RUNTIME_TRAINING_FIXTURES_H_
