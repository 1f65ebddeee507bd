#include "tests/e2e/e2e_jobs.h"

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/job_model.h"
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

std::vector<double> ReferenceLosses(const v1::JobSpec& spec) {
  auto dataset = worker::MakeDataset(spec);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  auto config = model::ModelConfig(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  kernels::CpuBackend backend;
  model::ReferenceTrainerConfig rc;
  rc.model = *config;
  rc.num_microbatches = model::NumMicrobatches(spec);
  rc.microbatch_size = spec.training().microbatch_size();
  rc.adamw = worker::OptimizerConfig(spec);
  rc.seed = spec.training().seed();
  auto trainer = model::ReferenceTrainer::Create(&backend, dataset->get(), rc);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  std::vector<double> losses;
  for (int s = 0; s < spec.training().steps(); ++s) losses.push_back((*trainer)->Step()->loss);
  return losses;
}

}  // namespace pipetrain::testing
