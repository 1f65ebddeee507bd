// Shared fixtures for the runtime's training tests (exactness, offload, checkpoint resume): a
// small GPT, a deterministic synthetic data stream, the optimizer settings, and a weight dump
// for bitwise comparisons.
#ifndef PIPETRAIN_TESTS_RUNTIME_TRAINING_FIXTURES_H_
#define PIPETRAIN_TESTS_RUNTIME_TRAINING_FIXTURES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/gpt_config.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "worker/model/gpt_chunk.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::worker::testing {

inline constexpr int kMicrobatchSize = 2;

// hidden 32, 4 heads, ffn 64, seq_len 8, vocab 24.
model::GptConfig SmallModel(int layers);
// Pseudo-random tokens per (step, microbatch); the target is a fixed function of the token.
MicrobatchSource Data(const model::GptConfig& config);
kernels::AdamWConfig Adam();
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
absl::StatusOr<ModelWorkers> MakeModelWorkers(const schedule::Schedule& plan,
                                              const model::GptConfig& config, int microbatches,
                                              double copy_bandwidth_bytes_per_s = 0);

}  // namespace pipetrain::worker::testing

#endif  // PIPETRAIN_TESTS_RUNTIME_TRAINING_FIXTURES_H_
