// StepCpuWork: the CPU work of a step besides its F, B and W that runs on a worker's own compute
// thread, so on shared cores it competes with the other workers' compute
// (shared_core_simulator.h). Two terms, both proportional to a stage's parameter bytes:
//
// * the gradient sum across data-parallel replicas (docs/data_parallel.md): at the stage's last
//   weight-gradient action each replica copies the stage's summed gradients out and installs the
//   running sum it received, draining its own buffered microbatches on top
//   (worker/runtime/replica_reducer.h): `stage_sum_cpu_s` per replica and stage, d > 1 only;
// * the optimizer step at the end of the step (the gradient norm and AdamW over the stage's
//   parameters): `stage_optimizer_cpu_s` per stage, on the worker holding it, once its gradients
//   are final (with replicas: once the stage's complete sum has arrived).
//
// Times are at full speed of one compute thread; the rates are measured on the CPU runtime
// (bench/runtime/action_overhead_bench.cc; the defaults are in planner/planner.h).
//
// Thread-safety: value type and pure function.
#ifndef PIPETRAIN_SCHEDULE_STEP_CPU_WORK_H_
#define PIPETRAIN_SCHEDULE_STEP_CPU_WORK_H_

#include <cstdint>
#include <vector>

namespace pipetrain::schedule {

struct StepCpuWork {
  // Indexed by stage; empty: no such work (the simulation is then as without this term).
  std::vector<double> stage_sum_cpu_s;
  std::vector<double> stage_optimizer_cpu_s;
};

// bytes / rate per stage; a rate <= 0 leaves its term empty, as does replicas <= 1 for the sum.
StepCpuWork StepCpuWorkFromBytes(const std::vector<int64_t>& stage_parameter_bytes, int replicas,
                                 double sum_bytes_per_s, double optimizer_bytes_per_s);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_STEP_CPU_WORK_H_
