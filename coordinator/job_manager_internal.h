// Helpers shared by the files that implement JobManager (job_manager.cc, job_launch.cc,
// job_recovery.cc); not part of the coordinator's interface.
#ifndef PIPETRAIN_COORDINATOR_JOB_MANAGER_INTERNAL_H_
#define PIPETRAIN_COORDINATOR_JOB_MANAGER_INTERNAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipetrain/v1/coordinator.pb.h"

namespace pipetrain::coordinator::internal {

void SetNow(v1::TimestampNs* t);

// A copy of `job` for events and listings: the plan without its action lists, and without
// `losses` and `learning_rates` unless asked. Avoids copying the (possibly large) plan.
v1::Job SlimCopy(v1::Job& job, bool with_losses);

// InvalidArgument "field: why".
absl::Status BadField(absl::string_view field, absl::string_view why);

// "checkpoint step-N", or "the start" for step 0.
std::string ResumePoint(int step);

}  // namespace pipetrain::coordinator::internal

#endif  // PIPETRAIN_COORDINATOR_JOB_MANAGER_INTERNAL_H_
