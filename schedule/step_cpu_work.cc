#include "schedule/step_cpu_work.h"

namespace pipetrain::schedule {

StepCpuWork StepCpuWorkFromBytes(const std::vector<int64_t>& stage_parameter_bytes, int replicas,
                                 double sum_bytes_per_s, double optimizer_bytes_per_s) {
  StepCpuWork work;
  for (int64_t bytes : stage_parameter_bytes) {
    if (replicas > 1 && sum_bytes_per_s > 0) {
      work.stage_sum_cpu_s.push_back(static_cast<double>(bytes) / sum_bytes_per_s);
    }
    if (optimizer_bytes_per_s > 0) {
      work.stage_optimizer_cpu_s.push_back(static_cast<double>(bytes) / optimizer_bytes_per_s);
    }
  }
  return work;
}

}  // namespace pipetrain::schedule
