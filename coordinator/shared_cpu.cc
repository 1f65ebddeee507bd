#include "coordinator/shared_cpu.h"

#include <algorithm>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "schedule/shared_core_simulator.h"

namespace pipetrain::coordinator {

void ApplySharedCpu(const std::vector<RankHost>& ranks, const schedule::Schedule& schedule,
                    const schedule::CostModel& costs, v1::Prediction* prediction) {
  prediction->clear_shared_cpu_step_s();
  prediction->clear_shared_cpu_note();
  const int p = schedule.num_workers;
  if (static_cast<int>(ranks.size()) != p) return;

  struct Host {
    int index = 0;
    int cores = 0;
    int threads = 0;
    int workers = 0;
  };
  std::map<std::string, Host> hosts;
  schedule::CoreSharing sharing;
  sharing.host_of_worker.assign(p, -1);
  sharing.threads_of_worker.assign(p, 1);
  for (int r = 0; r < p; ++r) {
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

  absl::StatusOr<double> step = schedule::SimulateSharedCores(schedule, costs, sharing);
  if (!step.ok()) {
    LOG(WARNING) << "shared-core simulation of the plan failed: " << step.status();
    return;
  }
  prediction->set_shared_cpu_step_s(*step);
  prediction->set_shared_cpu_note(absl::StrFormat(
      "%d CPU workers share %d core%s on host %s; simulated with shared cores (a device per "
      "worker: %.4f s)",
      busiest->workers, busiest->cores, busiest->cores == 1 ? "" : "s", busiest_name,
      prediction->makespan_s()));
}

double PredictedStepSeconds(const v1::Prediction& prediction) {
  if (prediction.shared_cpu_step_s() > 0) return prediction.shared_cpu_step_s();
  // Data parallelism: the step with the gradient sums across replicas.
  if (prediction.data_parallel_step_s() > 0) return prediction.data_parallel_step_s();
  return prediction.makespan_s();
}

}  // namespace pipetrain::coordinator
