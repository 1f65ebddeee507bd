#include "tests/runtime/training_fixtures.h"

#include <random>

#include "common/status_macros.h"
#include "model/cost_model.h"

namespace pipetrain::worker::testing {

model::GptConfig SmallModel(int layers) {
  model::GptConfig c;
  c.num_layers = layers;
  c.hidden = 32;
  c.heads = 4;
  c.ffn = 64;
  c.seq_len = 8;
  c.vocab = 24;
  return c;
}

MicrobatchSource Data(const model::GptConfig& c) {
  return [c](int step, int mb) -> absl::StatusOr<MicrobatchData> {
    std::mt19937 rng(static_cast<uint32_t>(1000 * step + mb + 7));
    std::uniform_int_distribution<int> tok(0, c.vocab - 1);
    MicrobatchData d;
    for (int i = 0; i < kMicrobatchSize * c.seq_len; ++i) {
      d.tokens.push_back(tok(rng));
      d.targets.push_back((d.tokens.back() * 5 + 3) % c.vocab);
    }
    return d;
  };
}

kernels::AdamWConfig Adam() {
  return {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
}

model::OptimizerSettings Constant() {
  model::OptimizerSettings s;
  s.adamw = Adam();
  return s;
}

model::OptimizerSettings Recipe() {
  model::OptimizerSettings s;
  s.adamw = Adam();
  s.lr_schedule = {model::LrScheduleKind::kCosine, /*warmup_steps=*/2, /*total_steps=*/4,
                   /*min_lr_ratio=*/0.1};
  s.decay = {.embeddings = true, .norms_and_biases = true};
  return s;
}

absl::StatusOr<double> AccumulateWholeBatch(model::GptChunk& chunk, const MicrobatchSource& data,
                                            int step, int m) {
  double loss = 0;
  for (int mb = 0; mb < m; ++mb) {
    PT_ASSIGN_OR_RETURN(MicrobatchData d, data(step, mb));
    model::ForwardInput in;
    in.tokens = d.tokens;
    in.targets = d.targets;
    in.loss_scale = 1.0f / m;
    PT_ASSIGN_OR_RETURN(auto out, chunk.Forward(mb, std::move(in)));
    loss += out.loss / m;
    PT_RETURN_IF_ERROR(chunk.Backward(mb, kernels::Tensor()).status());
  }
  return loss;
}

std::vector<std::vector<float>> Weights(kernels::Backend& backend, model::GptChunk& chunk) {
  std::vector<std::vector<float>> out;
  for (model::Parameter* p : chunk.parameters()) out.push_back(*backend.ToVector(p->value));
  return out;
}

absl::StatusOr<schedule::CostModel> ExactByteCosts(const schedule::Schedule& plan,
                                                   const model::GptConfig& config) {
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> specs,
                      model::SplitEvenly(config, plan.num_stages));
  schedule::CostModel costs =
      schedule::UniformCostModel(plan.num_workers, plan.ChunksPerWorker(), 1, 1, 1);
  costs.bytes_per_unit = 1.0;
  for (int s = 0; s < plan.num_stages; ++s) {
    const model::ChunkCost cc = model::EstimateChunkCost(config, specs[s], kMicrobatchSize);
    costs.stages[s].activation = static_cast<double>(cc.activation_bytes_after_forward);
    costs.stages[s].freed_by_b = static_cast<double>(cc.activation_bytes_after_forward -
                                                     cc.activation_bytes_after_backward_input);
  }
  return costs;
}

absl::StatusOr<ModelWorkers> MakeModelWorkers(const schedule::Schedule& plan,
                                              const model::GptConfig& config, int microbatches,
                                              double copy_bandwidth_bytes_per_s,
                                              const model::OptimizerSettings& optimizer) {
  ModelWorkers workers;
  for (int r = 0; r < plan.num_workers; ++r) {
    ModelStageConfig mc;
    mc.model = config;
    mc.optimizer = optimizer;
    mc.num_stages = plan.num_stages;
    mc.num_microbatches = microbatches;
    mc.copy_bandwidth_bytes_per_s = copy_bandwidth_bytes_per_s;
    for (int s = 0; s < plan.num_stages; ++s) {
      if (plan.WorkerOf(s) == r) mc.stages.push_back(s);
    }
    mc.data = Data(config);
    workers.backends.push_back(std::make_unique<kernels::CpuBackend>());
    PT_ASSIGN_OR_RETURN(auto runner, ModelStageRunner::Create(workers.backends.back().get(), mc));
    workers.runners.push_back(std::move(runner));
    workers.raw.push_back(workers.runners.back().get());
  }
  return workers;
}

}  // namespace pipetrain::worker::testing
