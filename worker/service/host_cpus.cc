#include "worker/service/host_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace pipetrain::worker {

int CpusFromCgroupMax(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || q <= 0) return 0;
  return static_cast<int>(std::ceil(q / period));
}

HostCpus DetectHostCpus() {
  HostCpus out;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) out.host = name;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) out.cpus = CPU_COUNT(&set);
  // A container's CPU limit (cgroup v2) can be below its affinity mask.
  std::ifstream cgroup("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (std::getline(cgroup, line)) {
    const int limit = CpusFromCgroupMax(line);
    if (limit > 0) out.cpus = out.cpus > 0 ? std::min(out.cpus, limit) : limit;
  }
  return out;
}

}  // namespace pipetrain::worker
