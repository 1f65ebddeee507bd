// SqliteJobStore: JobStore on an embedded SQLite database file in WAL mode. Jobs are stored as
// the serialized v1::Job proto next to indexed id / state / created columns; checkpoint records
// in their own table. Every write is one transaction, so a killed coordinator (kill -9) loses
// nothing that a call had returned OK for. A database file belongs to one store at a time: Open
// takes an exclusive lock on `<path>.lock` (flock, released when the store or its process goes)
// and refuses a database another coordinator holds.
//
// Thread-safety: thread-safe; one connection serialised by a mutex.
#ifndef PIPETRAIN_COORDINATOR_SQLITE_JOB_STORE_H_
#define PIPETRAIN_COORDINATOR_SQLITE_JOB_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/job_store.h"

struct sqlite3;

namespace pipetrain::coordinator {

struct SqliteJobStoreOptions {
  // synchronous=FULL (fsync every commit; survives power loss) or NORMAL (survives process
  // crashes; faster).
  bool fsync_every_commit = true;
};

class SqliteJobStore : public JobStore {
 public:
  // Opens (creating if needed) the database at `path` (":memory:" for a private in-memory one)
  // and creates the schema. FailedPrecondition when another store, in this process or another,
  // holds the database (the message names its process id).
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const std::string& path, const SqliteJobStoreOptions& options = {});
  ~SqliteJobStore() override;

  absl::StatusOr<v1::Job> CreateJob(const v1::Job& job) override;
  absl::Status UpdateJob(const v1::Job& job) override;
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id) override;
  absl::StatusOr<std::vector<v1::Job>> ListJobs(v1::JobState state) override;
  absl::Status PutCheckpoint(const CheckpointRecord& record) override;
  absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpoints(const std::string& job_id) override;
  absl::Status SaveStepTraces(const std::string& job_id,
                              const std::vector<v1::StepTrace>& traces) override;
  absl::StatusOr<std::vector<v1::StepTrace>> LoadStepTraces(const std::string& job_id) override;

 private:
  SqliteJobStore(sqlite3* db, int lock_fd) : db_(db), lock_fd_(lock_fd) {}
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  const int lock_fd_;  // the held `<path>.lock`; -1 for ":memory:"
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_SQLITE_JOB_STORE_H_
