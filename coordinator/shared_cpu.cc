#include "coordinator/shared_cpu.h"

#include <algorithm>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "planner/shared_host.h"
#include "schedule/shared_core_simulator.h"

namespace pipetrain::coordinator {

void ApplySharedCpu(const std::vector<RankHost>& ranks, const schedule::Schedule& schedule,
                    const schedule::CostModel& costs, v1::Prediction* prediction,
                    const schedule::StepCpuWork& cpu_work) {
  prediction->clear_shared_cpu_step_s();
  prediction->clear_shared_cpu_note();
  const int p = schedule.num_workers;
  const int n = static_cast<int>(ranks.size());
  if (p < 1 || n < p || n % p != 0) return;
  // Data parallelism: ranks[q * p + w] runs worker w of replica q; the replicas compute at once
  // on the same cores, and each stage's gradient sum across them takes stage_allreduce_s.
  const int d = n / p;
  if (d > 1 && prediction->stage_allreduce_s_size() != schedule.num_stages) {
    LOG(WARNING) << "shared-core simulation: " << d << " replicas but "
                 << prediction->stage_allreduce_s_size() << " stage sums for "
                 << schedule.num_stages << " stages; not simulated";
    return;
  }

  struct Host {
    int index = 0;
    int cores = 0;
    int threads = 0;
    int workers = 0;
  };
  std::map<std::string, Host> hosts;
  schedule::CoreSharing sharing;
  schedule::ReplicaSums replicas;
  replicas.replicas = d;
  if (d > 1) {
    replicas.stage_allreduce_s.assign(prediction->stage_allreduce_s().begin(),
                                      prediction->stage_allreduce_s().end());
  }
  sharing.host_of_worker.assign(n, -1);
  sharing.threads_of_worker.assign(n, 1);
  for (int r = 0; r < n; ++r) {
    const RankHost& rank = ranks[r];
    sharing.threads_of_worker[r] = std::max(1, rank.compute_threads);
    if (rank.host.empty() || rank.cpu_cores <= 0) continue;
    auto [it, added] = hosts.try_emplace(rank.host);
    Host& h = it->second;
    if (added) h.index = static_cast<int>(hosts.size()) - 1;
    // Workers of one host may see different CPU sets; the largest is the most they can share.
    h.cores = std::max(h.cores, rank.cpu_cores);
    h.threads += sharing.threads_of_worker[r];
    h.workers += 1;
    sharing.host_of_worker[r] = h.index;
  }
  const Host* busiest = nullptr;
  std::string busiest_name;
  sharing.host_cores.assign(hosts.size(), 0.0);
  for (const auto& [name, h] : hosts) {
    sharing.host_cores[h.index] = h.cores;
    if (h.threads <= h.cores) continue;
    const double load = static_cast<double>(h.threads) / h.cores;
    if (busiest == nullptr || load > static_cast<double>(busiest->threads) / busiest->cores) {
      busiest = &h;
      busiest_name = name;
    }
  }
  if (busiest == nullptr) return;

  absl::StatusOr<double> step =
      schedule::SimulateSharedCores(schedule, costs, sharing, replicas, cpu_work);
  if (!step.ok()) {
    LOG(WARNING) << "shared-core simulation of the plan failed: " << step.status();
    return;
  }
  prediction->set_shared_cpu_step_s(*step);
  const double own_device_s = d > 1 && prediction->data_parallel_step_s() > 0
                                  ? prediction->data_parallel_step_s()
                                  : prediction->makespan_s();
  prediction->set_shared_cpu_note(absl::StrFormat(
      "%d CPU workers share %d core%s on host %s; simulated with shared cores%s (a device per "
      "worker: %.4f s)",
      busiest->workers, busiest->cores, busiest->cores == 1 ? "" : "s", busiest_name,
      d > 1 ? absl::StrFormat(", %d replicas computing at once", d) : "", own_device_s));
}

double PredictedStepSeconds(const v1::Prediction& prediction) {
  return planner::ExpectedStepSeconds(prediction);
}

}  // namespace pipetrain::coordinator
