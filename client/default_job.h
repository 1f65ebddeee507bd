// The embedded default job: a small GPT learning multi-digit addition (the default data task)
// on 4 local CPU workers with the V-Half schedule. What `pipetrain local` runs when no job file
// is given, and a template for job files (`pipetrain local --print-default-job`).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_CLIENT_DEFAULT_JOB_H_
#define PIPETRAIN_CLIENT_DEFAULT_JOB_H_

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::client {

v1::JobSpec DefaultJobSpec();

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_DEFAULT_JOB_H_
