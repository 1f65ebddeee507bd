// FakeJobStore: an in-memory JobStore for tests, with failure injection (fail the next N calls
// of a kind, or every call) and an optional delay per call.
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_TESTS_FAKES_FAKE_JOB_STORE_H_
#define PIPETRAIN_TESTS_FAKES_FAKE_JOB_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/job_store.h"

namespace pipetrain::testing {

class FakeJobStore : public coordinator::JobStore {
 public:
  // Which calls an injected failure applies to.
  enum class Op { kCreate, kUpdate, kGet, kList, kCheckpoint, kStepTraces };

  // The next `count` calls of `op` fail with `status` (count < 0: every call until cleared).
  void FailNext(Op op, int count, absl::Status status = absl::UnavailableError("injected"));
  void ClearFailures();
  void SetDelay(absl::Duration delay);
  int update_count() const;

  absl::StatusOr<v1::Job> CreateJob(const v1::Job& job) override;
  absl::Status UpdateJob(const v1::Job& job) override;
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id) override;
  absl::StatusOr<std::vector<v1::Job>> ListJobs(v1::JobState state) override;
  absl::Status PutCheckpoint(const coordinator::CheckpointRecord& record) override;
  absl::StatusOr<std::vector<coordinator::CheckpointRecord>> ListCheckpoints(
      const std::string& job_id) override;
  absl::Status SaveStepTraces(const std::string& job_id,
                              const std::vector<v1::StepTrace>& traces) override;
  absl::StatusOr<std::vector<v1::StepTrace>> LoadStepTraces(const std::string& job_id) override;

 private:
  absl::Status Injected(Op op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int64_t>, coordinator::CheckpointRecord> checkpoints_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<v1::StepTrace>> step_traces_ ABSL_GUARDED_BY(mu_);
  std::map<Op, std::pair<int, absl::Status>> failures_ ABSL_GUARDED_BY(mu_);
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_FAKES_FAKE_JOB_STORE_H_
