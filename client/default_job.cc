#include "client/default_job.h"

namespace pipetrain::client {

v1::JobSpec DefaultJobSpec() {
  v1::JobSpec spec;
  spec.set_name("default-addition");
  v1::ModelSpec* model = spec.mutable_model();
  model->set_num_layers(8);  // V-shape on 4 workers: 8 stages of one block each
  model->set_hidden(64);
  model->set_num_heads(4);
  model->set_ffn_hidden(256);
  // seq_len and vocab_size come from the default data task (2-digit addition).
  v1::TrainingSpec* training = spec.mutable_training();
  training->set_steps(300);
  training->set_microbatch_size(16);
  training->set_global_batch(128);  // 8 microbatches per step
  training->set_seed(1234);
  training->mutable_optimizer()->set_name("adamw");
  training->mutable_optimizer()->set_learning_rate(3e-3);
  training->mutable_optimizer()->set_weight_decay(0.01);
  training->mutable_data()->set_source("default");
  v1::ParallelismSpec* parallelism = spec.mutable_parallelism();
  parallelism->set_num_workers(4);
  parallelism->set_schedule("v-half");
  spec.mutable_memory()->set_offload(v1::OFFLOAD_POLICY_NONE);
  return spec;
}

}  // namespace pipetrain::client
