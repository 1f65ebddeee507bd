// One real-CPU pipelined training run for the suite's sections: a small GPT trained by
// ModelStageRunner on each of p workers (threads, each with its own CPU backend) over the
// in-memory transport, measured step by step, and the schedule simulated with the per-stage
// F/B/W/BW times measured in the same run.
//
// Thread-safety: one run at a time per call; the call is synchronous.
#ifndef PIPETRAIN_BENCH_SUITE_CPU_RUN_H_
#define PIPETRAIN_BENCH_SUITE_CPU_RUN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/gemm_router.h"
#include "model/gpt_config.h"
#include "worker/model/optimizer_settings.h"

namespace pipetrain::bench {

struct CpuJob {
  model::GptConfig model;
  int microbatch_size = 4;
  int microbatches = 8;
  kernels::GemmRouting gemm_routing = kernels::GemmRouting::kPerShape;  // every rank's backend
};

struct CpuRun {
  std::string name;  // the schedule
  std::string error;
  // Fastest step per repetition, seconds: the slowest rank's whole step (its actions, the
  // end-of-step gradient-norm pass and the optimizer update).
  std::vector<double> measured;
  // Bubbles (schedule/bubble.h): per stage, and of the step (1 - work / (workers x step)).
  double simulated = 0, sim_bubble = 0, measured_bubble = 0;
  double sim_step_bubble = 0, measured_step_bubble = 0;
  double sim_peak = 0, measured_peak = 0;  // bytes, max over workers
  std::vector<double> losses;
  // The fastest step of the last repetition: the latest end of a rank's last action, seconds
  // (the step without its end-of-step work).
  double fastest_actions_end = 0;
  std::vector<double> grad_norms;  // per step (warm-up included), from the rank of stage 0
  int clipped_steps = 0;           // of those
  int64_t rolled_back = 0;         // updates rolled back, over every rank and step
  int64_t deferred = 0;            // updates deferred to the verdict, likewise
};

// `steps` measured steps after one warm-up step, with `optimizer`; appends one repetition's
// fastest step to run->measured and overwrites the rest of *run.
absl::Status RunCpuSchedule(const CpuJob& job, int p, int steps,
                            const model::OptimizerSettings& optimizer, CpuRun* run);

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_SUITE_CPU_RUN_H_
