#include "tests/e2e/e2e_jobs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "model/checkpoint_layout.h"
#include "model/job_model.h"
#include "worker/model/chunk_checkpoint.h"
#include "worker/model/exported_weights.h"
#include "worker/model/reference_trainer.h"
#include "worker/runtime/job_config.h"

namespace pipetrain::testing {

v1::JobSpec SmallJob(const std::string& schedule, int workers, int microbatches, int steps) {
  v1::JobSpec spec;
  spec.set_name("e2e");
  spec.mutable_model()->set_num_layers(2 * workers);
  spec.mutable_model()->set_hidden(32);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_model()->set_ffn_hidden(64);
  spec.mutable_training()->set_steps(steps);
  spec.mutable_training()->set_microbatch_size(4);
  spec.mutable_training()->set_global_batch(4 * microbatches);
  spec.mutable_training()->set_seed(99);
  spec.mutable_training()->mutable_optimizer()->set_learning_rate(3e-3);
  spec.mutable_parallelism()->set_num_workers(workers);
  spec.mutable_parallelism()->set_schedule(schedule);
  return spec;
}

std::vector<double> ReferenceLosses(const v1::JobSpec& spec) { return RunReference(spec).losses; }

v1::JobSpec WithRecipe(v1::JobSpec spec) {
  v1::OptimizerSpec* o = spec.mutable_training()->mutable_optimizer();
  o->set_lr_schedule("cosine");
  o->set_warmup_steps(1);
  o->set_min_lr_ratio(0.1);
  o->set_weight_decay(0.05);
  o->set_decay_embeddings(true);
  o->set_decay_norms_and_biases(true);
  return spec;
}

v1::JobSpec WithClipping(v1::JobSpec spec) {
  spec.mutable_training()->mutable_optimizer()->set_clip_grad_norm(0);
  const ReferenceRun unclipped = RunReference(spec);
  if (unclipped.grad_norms.empty()) return spec;
  const auto [lo, hi] =
      std::minmax_element(unclipped.grad_norms.begin(), unclipped.grad_norms.end());
  spec.mutable_training()->mutable_optimizer()->set_clip_grad_norm((*lo + *hi) / 2);
  return spec;
}

ReferenceRun RunReference(const v1::JobSpec& spec) {
  ReferenceRun run;
  auto dataset = worker::OpenJobData(spec);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  auto config = model::ModelConfig(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  auto optimizer = worker::OptimizerSettingsOf(spec);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  if (!dataset.ok() || !config.ok() || !optimizer.ok()) return run;
  const bool bf16 = spec.compute().precision() == v1::PRECISION_BF16;
  kernels::CpuBackend backend({.bf16_gemm = bf16});
  model::ReferenceTrainerConfig rc;
  rc.stash_bf16 = bf16;
  rc.model = *config;
  rc.num_microbatches = model::NumMicrobatches(spec);
  rc.microbatch_size = spec.training().microbatch_size();
  rc.optimizer = *optimizer;
  rc.seed = spec.training().seed();
  auto trainer = model::ReferenceTrainer::Create(&backend, dataset->train.get(), rc);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  if (const std::string& init_from = spec.model().init_from(); !init_from.empty()) {
    model::GptChunk* whole = (*trainer)->model();
    const absl::Status loaded =
        model::LoadExportedWeights(init_from, absl::MakeSpan(&whole, 1));
    EXPECT_TRUE(loaded.ok()) << loaded;
    if (!loaded.ok()) return run;
  }
  for (int s = 0; s < spec.training().steps(); ++s) {
    absl::StatusOr<model::StepStats> stats = (*trainer)->Step();
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return run;
    run.losses.push_back(stats->loss);
    run.skipped.push_back(stats->update_skipped);
    run.grad_norms.push_back(stats->grad_norm);
    run.clipped.push_back(stats->grad_clipped);
    if (worker::EvaluationDue(spec, s + 1)) {
      const int batches = model::WithDefaults(spec).eval().batches();
      absl::StatusOr<model::StepStats> val =
          (*trainer)->Validate(*dataset->validation, batches);
      EXPECT_TRUE(val.ok()) << val.status();
      if (!val.ok()) return run;
      run.validation[s + 1] = val->loss;
    }
  }
  for (model::Parameter* p : (*trainer)->model()->parameters()) {
    run.weights.push_back(*backend.ToVector(p->value));
  }
  return run;
}

std::vector<std::vector<float>> CheckpointWeights(const v1::JobSpec& spec, const std::string& dir,
                                                  int step, int num_stages) {
  auto config = model::ModelConfig(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  auto specs = model::SplitEvenly(*config, num_stages);
  EXPECT_TRUE(specs.ok()) << specs.status();
  if (!specs.ok()) return {};
  kernels::CpuBackend backend;
  std::vector<std::vector<float>> weights;
  for (int s = 0; s < num_stages; ++s) {
    auto chunk = model::GptChunk::Create(&backend, *config, (*specs)[s]);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    if (!chunk.ok()) return {};
    const std::string path = model::StageCheckpointPath(dir, step, s);
    absl::StatusOr<int64_t> loaded = model::LoadChunkCheckpoint(path, **chunk);
    EXPECT_TRUE(loaded.ok()) << path << ": " << loaded.status();
    if (!loaded.ok()) return {};
    for (model::Parameter* p : (*chunk)->parameters()) {
      weights.push_back(*backend.ToVector(p->value));
    }
  }
  return weights;
}

}  // namespace pipetrain::testing
