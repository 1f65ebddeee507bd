// Shared CPU hosts: the simulator gives every worker its own device, but CPU workers started on
// one machine (the local cluster: four workers on a two-core box) share its cores and cannot all
// compute at once. For a job whose CPU workers run more compute threads on a host than it has
// cores, the plan's step time is simulated again with those workers sharing the cores
// (schedule/shared_core_simulator.h) and kept next to the plain simulation.
//
// Why: on the default job, 4 workers on 2 cores measured 0.137 s steps against 0.071 s
// simulated, while 2 workers on the same 2 cores measured 0.128 s against 0.127 s. With this,
// the 4-worker step was predicted within 1-17% (v-half 0.1301 / 0.1293 s, 1f1b 0.1214 / 0.1454 s,
// zb-v 0.1029 / 0.1105 s). With data parallelism the replicas were left out at first: the plan
// of one replica assumes its p workers have the cores to themselves, but d x p workers compute
// at once (the 4 x 1 split of the default job on 2 cores measured 2-4x the plain prediction),
// so all d x p ranks are simulated together (docs/data_parallel.md). The bubble ratio is left to
// the plain simulation: the measured one on shared cores also counts the time a worker waits for a
// core (0.39-0.46 measured against 0.05-0.19 simulated in those runs), which fair sharing spreads
// over slower actions instead; a first-come run-queue model over-predicted it and the step time
// under load, so it was not kept.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_COORDINATOR_SHARED_CPU_H_
#define PIPETRAIN_COORDINATOR_SHARED_CPU_H_

#include <string>
#include <vector>

#include "pipetrain/v1/plan.pb.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/step_cpu_work.h"

namespace pipetrain::coordinator {

// Where one rank computes, as its worker registered it.
struct RankHost {
  std::string host;   // empty: not a CPU worker (GPU, emulated): it shares nothing
  int cpu_cores = 0;  // CPUs the worker may use; 0 (unknown) leaves the host out
  int compute_threads = 1;
};

// When some host's ranks run more compute threads than it has cores, sets
// prediction->shared_cpu_step_s to the shared-core simulation of `schedule` under `costs` (the
// plan as the planner built it) and shared_cpu_note to a sentence naming the busiest such host;
// clears both otherwise (or if the plan cannot be simulated: then a warning is logged).
// ranks[r] is job rank r: p ranks, or d x p for a data-parallel job of d replicas (rank q * p + w
// runs pipeline rank w of replica q), whose replicas then share the cores too and whose stage
// sums (prediction->stage_allreduce_s) run as the workers run them (shared_core_simulator.h).
// `cpu_work`: the step's CPU work besides F, B and W (the sums' own CPU time and the optimizer
// step, planner::StepCpuWorkOf), simulated on the same cores; empty leaves it out.
void ApplySharedCpu(const std::vector<RankHost>& ranks, const schedule::Schedule& schedule,
                    const schedule::CostModel& costs, v1::Prediction* prediction,
                    const schedule::StepCpuWork& cpu_work = {});

// The step time to expect: the shared-core simulation when set, else the step with the
// data-parallel gradient sums when set, else the simulated makespan.
double PredictedStepSeconds(const v1::Prediction& prediction);

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_SHARED_CPU_H_
