// StepCpuWork: the CPU work of a step besides its F, B and W, which on shared cores competes with
// the workers' compute (shared_core_simulator.h). Two terms run on a worker's own compute thread,
// both proportional to a stage's parameter bytes:
//
// * the gradient sum across data-parallel replicas (docs/data_parallel.md): at the stage's last
//   weight-gradient action each replica copies the stage's summed gradients out and installs the
//   running sum it received, draining its own buffered microbatches on top
//   (worker/runtime/replica_reducer.h): `stage_sum_cpu_s` per replica and stage, d > 1 only;
// * the optimizer step at the end of the step (the gradient norm and AdamW over the stage's
//   parameters): `stage_optimizer_cpu_s` per stage, on the worker holding it, once its gradients
//   are final (with replicas: once the stage's complete sum has arrived).
// And one term per message between workers, on threads of their own:
// * `message_cpu_s`: what one activation or gradient message costs its host's cores, all threads
//   together (the sender's compute thread queuing it, the transport's writer and reader threads
//   framing, copying and waking, the receiver taking it). It runs beside the compute, so it
//   delays the message only when the cores are busy: a message arrives at the later of its link
//   time and the end of this work. On the default job's 4 workers on 2 cores that is 96 messages
//   a step, ~16% of the step's F, B and W in CPU, which the shared-core step used to miss.
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
  double message_cpu_s = 0;  // per message between workers; 0: not modelled
};

// bytes / rate per stage; a rate <= 0 leaves its term empty, as does replicas <= 1 for the sum.
StepCpuWork StepCpuWorkFromBytes(const std::vector<int64_t>& stage_parameter_bytes, int replicas,
                                 double sum_bytes_per_s, double optimizer_bytes_per_s);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_STEP_CPU_WORK_H_
