#include "planner/shared_host.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "schedule/shared_core_simulator.h"

namespace pipetrain::planner {

absl::Status ApplySharedHost(int cores, PlannedJob* planned) {
  v1::Prediction* prediction = planned->plan.mutable_prediction();
  prediction->clear_shared_cpu_step_s();
  prediction->clear_shared_cpu_note();
  const int p = planned->schedule.num_workers;
  const int d = std::max(1, planned->plan.data_parallel());
  const int workers = d * p;
  if (cores <= 0 || workers <= cores) return absl::OkStatus();
  schedule::CoreSharing sharing;
  sharing.host_of_worker.assign(workers, 0);
  sharing.host_cores = {static_cast<double>(cores)};
  sharing.threads_of_worker.assign(workers, 1);
  schedule::ReplicaSums sums;
  sums.replicas = d;
  if (d > 1) {
    sums.stage_allreduce_s.assign(prediction->stage_allreduce_s().begin(),
                                  prediction->stage_allreduce_s().end());
  }
  PT_ASSIGN_OR_RETURN(const double step,
                      schedule::SimulateSharedCores(planned->schedule, planned->costs, sharing,
                                                    sums, planned->cpu_work));
  const double own_devices = d > 1 && prediction->data_parallel_step_s() > 0
                                 ? prediction->data_parallel_step_s()
                                 : prediction->makespan_s();
  prediction->set_shared_cpu_step_s(step);
  prediction->set_shared_cpu_note(absl::StrFormat(
      "%d CPU workers share %d core%s (--host-cores); simulated with shared cores%s, gradient "
      "sums and optimizer steps on the cores too (a device per worker: %.4f s)",
      workers, cores, cores == 1 ? "" : "s",
      d > 1 ? absl::StrFormat(", %d replicas computing at once", d) : "", own_devices));
  return absl::OkStatus();
}

double ExpectedStepSeconds(const v1::Prediction& prediction) {
  if (prediction.shared_cpu_step_s() > 0) return prediction.shared_cpu_step_s();
  if (prediction.data_parallel_step_s() > 0) return prediction.data_parallel_step_s();
  return prediction.makespan_s();
}

}  // namespace pipetrain::planner
