#include "coordinator/shared_cpu.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"

namespace pipetrain::coordinator {

void ApplySharedCpuBound(const std::vector<RankHost>& ranks, v1::Prediction* prediction) {
  struct Host {
    int cores = 0;
    int threads = 0;
    int workers = 0;
    double cpu_s = 0;  // compute time x threads
  };
  std::map<std::string, Host> hosts;
  const int n = std::min(static_cast<int>(ranks.size()), prediction->busy_s_size());
  for (int r = 0; r < n; ++r) {
    const RankHost& rank = ranks[r];
    if (rank.host.empty() || rank.cpu_cores <= 0) continue;
    Host& h = hosts[rank.host];
    // Workers of one host may see different CPU sets; the largest is the most they can share.
    h.cores = std::max(h.cores, rank.cpu_cores);
    const int threads = std::max(1, rank.compute_threads);
    h.threads += threads;
    h.workers += 1;
    h.cpu_s += prediction->busy_s(r) * threads;
  }
  double bound = 0;
  std::string note;
  for (const auto& [name, h] : hosts) {
    if (h.threads <= h.cores) continue;
    const double step = h.cpu_s / h.cores;
    if (step <= bound) continue;
    bound = step;
    note = absl::StrFormat(
        "%d CPU workers share %d core%s on host %s: their %.4f s of compute per step need at "
        "least %.4f s (the simulation assumes a device per worker)",
        h.workers, h.cores, h.cores == 1 ? "" : "s", name, h.cpu_s, step);
  }
  if (bound > prediction->makespan_s()) {
    prediction->set_shared_cpu_step_s(bound);
    prediction->set_shared_cpu_note(note);
  } else {
    prediction->clear_shared_cpu_step_s();
    prediction->clear_shared_cpu_note();
  }
}

double PredictedStepSeconds(const v1::Prediction& prediction) {
  return std::max(prediction.makespan_s(), prediction.shared_cpu_step_s());
}

}  // namespace pipetrain::coordinator
