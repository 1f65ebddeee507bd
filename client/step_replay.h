// StepReplay: one measured step simulated again with its own costs, to tell the two reasons a
// prediction misses apart: costs the plan got wrong, or time the model does not have.
//
// The replay takes the plan's schedule and cost model and replaces, for every stage, the F, B, W
// (and fused BW) times with the mean CPU time the step's actions of that stage and kind used
// (ActionTiming.cpu_ns: the work without the waits), and the transfer time between workers with
// the step's measured hop: from a send's start to the matching receive's end, averaged over the
// messages whose receiver was already waiting (so the hop holds the sender's hand-off, the
// transport and the receiver's wake-up, and no wait for the receiver). Each rank's times are
// relative to its own step start, so a pair of ranks' clocks is aligned first from the messages
// both ways (the least apparent hop each way is the same hop plus and minus the clock offset).
// The replay is then simulated with the ranks of every replica sharing `host_cores` cores of
// one host (processor sharing, schedule/shared_core_simulator.h; 0: a device per rank), each
// message also costing the host `message_cpu_s` of CPU beside the compute (the transport's
// threads, which the traces do not time; the planner's figure, StepCpuWork::message_cpu_s). The
// gradient sums across replicas take no time in it: the report's measured step is replica 0's
// actions, which end before its sums do.
//
// What it shows on the default job (docs/data_parallel.md): where the replayed step matches the
// measured one, the model's structure holds and the plan's costs were the miss; where it stays
// short, the difference is time the processor-sharing model lacks (cores idle while threads
// wait to be woken).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_CLIENT_STEP_REPLAY_H_
#define PIPETRAIN_CLIENT_STEP_REPLAY_H_

#include <utility>

#include "absl/status/statusor.h"
#include "pipetrain/v1/coordinator.pb.h"
#include "schedule/cost_model.h"
#include "schedule/schedule.h"

namespace pipetrain::client {

struct StepReplay {
  schedule::CostModel costs;  // the plan's, with the step's own compute times and hop
  double hop_s = 0;           // the measured hop (the plan's comm where none was measurable)
  int hops_measured = 0;      // messages the hop is the mean of
  double message_cpu_s = 0;   // each message's CPU on the shared cores, as given
  double step_s = 0;          // the replayed step: first action to last
};

// The mean hop of replica 0's messages in `trace` (see above) and how many it averages; {0, 0}
// when no pair of ranks exchanged messages both ways with a waiting receiver.
// trace.ranks[r] holds one timing per action of worker r's list, in list order (as for
// MeasuredStep); InvalidArgument otherwise.
absl::StatusOr<std::pair<double, int>> MeasuredHop(const schedule::Schedule& schedule,
                                                   const v1::StepTrace& trace);

// `replicas` >= 1 copies of the schedule share the host (data parallelism). Every stage and
// compute kind of the schedule must have CPU times in replica 0's ranks (FailedPrecondition
// naming the first that has none: a GPU worker's trace, or one from before the CPU times were
// recorded).
absl::StatusOr<StepReplay> ReplayStep(const schedule::Schedule& schedule,
                                      const schedule::CostModel& plan_costs,
                                      const v1::StepTrace& trace, double host_cores,
                                      int replicas = 1, double message_cpu_s = 0);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_STEP_REPLAY_H_
