// JobStore: the coordinator's durable record of jobs (the v1::Job proto, with indexed id, state
// and creation time), of checkpoints (for fault tolerance) and of the measured step traces a job
// keeps (step_traces.h). One small interface with a SQLite
// implementation (sqlite_job_store.h) and an in-memory fake for tests (tests/fakes/).
//
// Every method is one transaction: it either happens completely or not at all.
// Thread-safety: implementations are thread-safe.
#ifndef PIPETRAIN_COORDINATOR_JOB_STORE_H_
#define PIPETRAIN_COORDINATOR_JOB_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipetrain/v1/coordinator.pb.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::coordinator {

// One checkpoint of one job: `path` holds the state after `step` steps; `complete` once every
// rank has written its part.
struct CheckpointRecord {
  std::string job_id;
  int64_t step = 0;
  std::string path;
  bool complete = false;
};

// "job-000017" for sequence number 17 (at least six digits; ids sort by number).
std::string JobIdFromSequence(int64_t sequence);
// The sequence number of a well-formed job id, or nullopt.
std::optional<int64_t> SequenceFromJobId(const std::string& job_id);

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Assigns the next job id (monotonic, never reused, also across restarts), stores `job` under
  // it and returns the stored job (with `id` set).
  virtual absl::StatusOr<v1::Job> CreateJob(const v1::Job& job) = 0;
  // Replaces the stored job with the same id. NotFound if there is none.
  virtual absl::Status UpdateJob(const v1::Job& job) = 0;
  // NotFound if there is no such job.
  virtual absl::StatusOr<v1::Job> GetJob(const std::string& job_id) = 0;
  // Every job in id order; `state` JOB_STATE_UNSPECIFIED means all states.
  virtual absl::StatusOr<std::vector<v1::Job>> ListJobs(v1::JobState state) = 0;

  // Inserts or replaces the record for (job_id, step).
  virtual absl::Status PutCheckpoint(const CheckpointRecord& record) = 0;
  // Every checkpoint of the job, by step.
  virtual absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpoints(
      const std::string& job_id) = 0;

  // Replaces the job's stored step traces with `traces`.
  virtual absl::Status SaveStepTraces(const std::string& job_id,
                                      const std::vector<v1::StepTrace>& traces) = 0;
  // The job's stored step traces, by step (empty if none).
  virtual absl::StatusOr<std::vector<v1::StepTrace>> LoadStepTraces(
      const std::string& job_id) = 0;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_JOB_STORE_H_
