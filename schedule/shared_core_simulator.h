// SimulateSharedCores: the step time of a schedule when workers share CPU cores. The simulator
// (simulator.h) gives every worker a device of its own; CPU workers started on one machine (the
// local cluster: four workers on two cores) share its cores, and then a compute action runs at
// the speed the operating system's fair sharing gives it: with n compute threads busy on a host
// of c cores, each runs at min(1, c / n) of its full speed. This simulates exactly that (processor
// sharing, recomputed at every start and end of a compute action), with the same dependencies and
// transfer latency as the simulator; copies (OFFLOAD/RELOAD) take no time here.
//
// Data parallelism (docs/data_parallel.md): ReplicaSums::replicas d > 1 copies of the schedule run
// side by side, replica q's worker w being job rank q * p + w, all of them competing for their
// hosts' cores. This is the cost a plan of one replica misses on a shared host: the replicas
// compute at once (where one pipeline leaves its bubbles to the other workers), so d x p workers
// contend for the cores. The gradient sum of each stage runs as the workers run it (worker/runtime/
// replica_reducer.h): after the stage's last weight-gradient action, replica 0 sends its sum
// on; replica q > 0 waits there (its worker blocked) for the sum from replica q - 1, then sends
// the longer sum on; the last replica sends the complete sum back, and every other replica
// waits for it at the end of its step. Each of these 2 (d - 1) hops takes
// stage_allreduce_s / (2 (d - 1)) (schedule/data_parallel_step.h's model of one stage's sum).
//
// The step's own CPU work (step_cpu_work.h), when given, runs on the workers' compute threads
// and shares the cores like F, B and W: each stage's gradient-sum work on every replica at the
// stage's last weight-gradient action (replica 0 before it sends; replica q > 0 once the sum
// from q - 1 has arrived, before it sends on), and, after a worker's last action, the optimizer
// step of the stages it holds, once each of them has its final gradients (replica d - 1: when
// it sent the complete sum; the others: when that sum has reached them, d - 1 hops later). The
// step then ends when the last optimizer step ends. Not modelled: the tied-embedding exchange
// and the gradient-norm chain between the stages (a few scalars per step). Each message between
// workers of one host (the schedule's SEND actions) is, with cpu_work.message_cpu_s, a job of
// that much CPU on the sender's host, sharing the cores like a compute thread from the send on;
// the message arrives at the later of the send plus the link time (costs.comm) and that job's
// end. (Schedules without explicit transfers, and senders with a device of their own, keep the
// link time alone.)
//
// Measured on the default job (4 workers, 2 cores, profiled costs): see docs/BENCHMARKS.md and
// coordinator/shared_cpu.h.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_SCHEDULE_SHARED_CORE_SIMULATOR_H_
#define PIPETRAIN_SCHEDULE_SHARED_CORE_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"
#include "schedule/step_cpu_work.h"

namespace pipetrain::schedule {

struct CoreSharing {
  // Per worker of every replica (job rank q * p + w; p of them with one replica): its host
  // (index into host_cores), or -1 for a device of its own.
  std::vector<int> host_of_worker;
  std::vector<double> host_cores;      // cores of each host (> 0)
  std::vector<int> threads_of_worker;  // compute threads of each worker (>= 1)
};

// Data parallelism: how many replicas of the schedule run (>= 1) and, with more than one, the
// time of each stage's whole gradient sum across them (indexed by stage, >= 0; what
// Prediction.stage_allreduce_s holds).
struct ReplicaSums {
  int replicas = 1;
  std::vector<double> stage_allreduce_s;
};

// The makespan of one step (first start to last end; with replicas, to the last gradient sum's
// arrival; with `cpu_work`, to the last optimizer step's end). InvalidArgument for sizes that do
// not match the schedule (or a stage without a weight-gradient action when replicas > 1, or a
// negative CPU time); FailedPrecondition if the schedule deadlocks.
absl::StatusOr<double> SimulateSharedCores(const Schedule& schedule, const CostModel& costs,
                                           const CoreSharing& sharing,
                                           const ReplicaSums& replicas = {},
                                           const StepCpuWork& cpu_work = {});

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SHARED_CORE_SIMULATOR_H_
