// The bucket boundaries of the step-time histograms both daemons export
// (pipetrain_job_step_seconds, pipetrain_worker_step_seconds), the same on both so that their
// quantiles compare: powers of two from 1 ms to 131 s (18 buckets, then +Inf), which covers a
// tiny CPU job's milliseconds and a large GPU job's tens of seconds at a factor-2 resolution.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COMMON_STEP_BUCKETS_H_
#define PIPETRAIN_COMMON_STEP_BUCKETS_H_

#include <vector>

namespace pipetrain {

inline std::vector<double> StepSecondsBuckets() {
  std::vector<double> bounds;
  double bound = 0.001;
  for (int i = 0; i < 18; ++i, bound *= 2) bounds.push_back(bound);
  return bounds;
}

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_STEP_BUCKETS_H_
