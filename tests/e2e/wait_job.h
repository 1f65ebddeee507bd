// WaitJob (tests): polls a coordinator's GetJob until a condition on the job holds.
#ifndef PIPETRAIN_TESTS_E2E_WAIT_JOB_H_
#define PIPETRAIN_TESTS_E2E_WAIT_JOB_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/job_client.h"

namespace pipetrain::testing {

// Polls GetJob every 5 ms until `done` holds; the last job seen, or an error after `timeout`
// saying where the job was.
inline absl::StatusOr<v1::Job> WaitJob(client::JobClient& jobs, const std::string& id,
                                       const std::function<bool(const v1::Job&)>& done,
                                       absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<v1::Job> job = absl::UnavailableError("not asked yet");
  while (absl::Now() < deadline) {
    job = jobs.Get(id);
    if (job.ok() && done(*job)) return job;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "job ", id, " did not get there in ", absl::FormatDuration(timeout), "; last seen: ",
      job.ok() ? absl::StrCat(v1::JobState_Name(job->state()), " steps_done ", job->steps_done(),
                              " ", job->failure_reason())
               : job.status().ToString()));
}

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_WAIT_JOB_H_
