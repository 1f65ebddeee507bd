// HostCpus: the machine a worker computes on and the CPUs it may use, reported at registration
// so the coordinator can see when CPU workers share a host with fewer cores than they need
// (Prediction.shared_cpu_step_s).
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_WORKER_SERVICE_HOST_CPUS_H_
#define PIPETRAIN_WORKER_SERVICE_HOST_CPUS_H_

#include <string>

namespace pipetrain::worker {

struct HostCpus {
  std::string host;  // hostname (a pod's own name under Kubernetes)
  int cpus = 0;      // 0 if unknown
};

HostCpus DetectHostCpus();

// CPUs allowed by a cgroup v2 `cpu.max` line ("max 100000" or "<quota> <period>"), rounded up;
// 0 when unlimited or unparsable. Exposed for tests.
int CpusFromCgroupMax(const std::string& cpu_max);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_HOST_CPUS_H_
