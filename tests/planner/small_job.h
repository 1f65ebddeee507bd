// The planner tests' small job: 4 layers, hidden 32, 4 heads, ffn 64, a global batch of 32 in
// microbatches of 4 (8 per step, split over d replicas), `schedule` on p pipeline ranks.
#ifndef PIPETRAIN_TESTS_PLANNER_SMALL_JOB_H_
#define PIPETRAIN_TESTS_PLANNER_SMALL_JOB_H_

#include <string>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::planner::testing {

inline v1::JobSpec SmallJob(const std::string& schedule, int p, int d) {
  v1::JobSpec spec;
  spec.mutable_model()->set_num_layers(4);
  spec.mutable_model()->set_hidden(32);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_model()->set_ffn_hidden(64);
  spec.mutable_training()->set_steps(3);
  spec.mutable_training()->set_microbatch_size(4);
  spec.mutable_training()->set_global_batch(32);
  spec.mutable_parallelism()->set_num_workers(p);
  spec.mutable_parallelism()->set_schedule(schedule);
  spec.mutable_parallelism()->set_data_parallel(d);
  return spec;
}

}  // namespace pipetrain::planner::testing

#endif  // PIPETRAIN_TESTS_PLANNER_SMALL_JOB_H_
