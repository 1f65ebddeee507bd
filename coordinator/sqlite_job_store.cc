#include "coordinator/sqlite_job_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::coordinator {
namespace {

absl::Status SqliteError(sqlite3* db, absl::string_view what) {
  return absl::InternalError(absl::StrCat("job store: ", what, ": ", sqlite3_errmsg(db)));
}

// A prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  absl::Status status(absl::string_view what) const {
    return rc_ == SQLITE_OK ? absl::OkStatus() : SqliteError(db_, what);
  }
  void BindText(int index, const std::string& text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int index, const std::string& bytes) {
    sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  }
  void BindInt(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  std::string ColumnBytes(int column) const {
    const void* data = sqlite3_column_blob(stmt_, column);
    const int size = sqlite3_column_bytes(stmt_, column);
    return data == nullptr ? std::string() : std::string(static_cast<const char*>(data), size);
  }
  int64_t ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

// Takes `<path>.lock` exclusively without waiting and writes this process's id in it; the fd.
// Two coordinators on one database would hand the same jobs to different workers.
absl::StatusOr<int> LockDatabase(const std::string& path) {
  const std::string lock_path = path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("job store: cannot open the lock file ", lock_path,
                                               ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    if (error != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("job store: cannot lock ", lock_path, ": ", std::strerror(error)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "job store: the database ", path, " is in use by another coordinator (process ",
        n > 0 ? std::string(holder, n) : "?", ", holding ", lock_path,
        "); two coordinators must never share a database"));
  }
  const std::string pid = std::to_string(::getpid());
  const bool recorded = ::ftruncate(fd, 0) == 0 &&
                        ::pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
  (void)recorded;  // the id only serves the message a refused second coordinator prints
  return fd;
}

absl::StatusOr<v1::Job> ParseJob(const std::string& bytes) {
  v1::Job job;
  if (!job.ParseFromString(bytes)) return absl::DataLossError("job store: unparsable job row");
  return job;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const std::string& path, const SqliteJobStoreOptions& options) {
  int lock_fd = -1;
  if (path != ":memory:") {
    PT_ASSIGN_OR_RETURN(lock_fd, LockDatabase(path));
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = absl::UnavailableError(
        absl::StrCat("job store: cannot open database ", path, ": ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    if (lock_fd >= 0) ::close(lock_fd);
    return status;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(db, lock_fd));
  absl::MutexLock lock(&store->mu_);
  PT_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  PT_RETURN_IF_ERROR(store->Exec(options.fsync_every_commit ? "PRAGMA synchronous=FULL"
                                                            : "PRAGMA synchronous=NORMAL"));
  PT_RETURN_IF_ERROR(
      store->Exec("CREATE TABLE IF NOT EXISTS jobs ("
                  "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                  "  id TEXT NOT NULL UNIQUE,"
                  "  state INTEGER NOT NULL,"
                  "  created_ns INTEGER NOT NULL,"
                  "  job BLOB NOT NULL);"
                  "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);"
                  "CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_ns);"
                  "CREATE TABLE IF NOT EXISTS checkpoints ("
                  "  job_id TEXT NOT NULL,"
                  "  step INTEGER NOT NULL,"
                  "  path TEXT NOT NULL,"
                  "  complete INTEGER NOT NULL,"
                  "  PRIMARY KEY (job_id, step));"
                  "CREATE TABLE IF NOT EXISTS step_traces ("
                  "  job_id TEXT NOT NULL,"
                  "  step INTEGER NOT NULL,"
                  "  trace BLOB NOT NULL,"
                  "  PRIMARY KEY (job_id, step));"));
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the database to the next coordinator
}

absl::Status SqliteJobStore::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status status =
        absl::InternalError(absl::StrCat("job store: ", sql, ": ", error != nullptr ? error : "?"));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> SqliteJobStore::CreateJob(const v1::Job& job) {
  absl::MutexLock lock(&mu_);
  PT_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> absl::StatusOr<v1::Job> {
    // Insert with a placeholder id to get the sequence number, then write the real row.
    Statement insert(db_, "INSERT INTO jobs (id, state, created_ns, job) VALUES (?, ?, ?, ?)");
    PT_RETURN_IF_ERROR(insert.status("prepare insert"));
    insert.BindText(1, "pending");  // one pending row at most: we hold mu_ and the transaction
    insert.BindInt(2, job.state());
    insert.BindInt(3, job.created().unix_ns());
    insert.BindBlob(4, std::string());
    if (insert.Step() != SQLITE_DONE) return SqliteError(db_, "insert job");
    const int64_t seq = sqlite3_last_insert_rowid(db_);
    v1::Job stored = job;
    stored.set_id(JobIdFromSequence(seq));
    Statement update(db_, "UPDATE jobs SET id = ?, job = ? WHERE seq = ?");
    PT_RETURN_IF_ERROR(update.status("prepare update"));
    update.BindText(1, stored.id());
    update.BindBlob(2, stored.SerializeAsString());
    update.BindInt(3, seq);
    if (update.Step() != SQLITE_DONE) return SqliteError(db_, "write job");
    return stored;
  };
  absl::StatusOr<v1::Job> result = body();
  if (!result.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return result.status();
  }
  PT_RETURN_IF_ERROR(Exec("COMMIT"));
  return result;
}

absl::Status SqliteJobStore::UpdateJob(const v1::Job& job) {
  absl::MutexLock lock(&mu_);
  Statement update(db_, "UPDATE jobs SET state = ?, job = ? WHERE id = ?");
  PT_RETURN_IF_ERROR(update.status("prepare update"));
  update.BindInt(1, job.state());
  update.BindBlob(2, job.SerializeAsString());
  update.BindText(3, job.id());
  if (update.Step() != SQLITE_DONE) return SqliteError(db_, "update job");
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("job store: no job ", job.id()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> SqliteJobStore::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Statement select(db_, "SELECT job FROM jobs WHERE id = ?");
  PT_RETURN_IF_ERROR(select.status("prepare select"));
  select.BindText(1, job_id);
  const int rc = select.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("job store: no job ", job_id));
  if (rc != SQLITE_ROW) return SqliteError(db_, "select job");
  return ParseJob(select.ColumnBytes(0));
}

absl::StatusOr<std::vector<v1::Job>> SqliteJobStore::ListJobs(v1::JobState state) {
  absl::MutexLock lock(&mu_);
  const bool all = state == v1::JOB_STATE_UNSPECIFIED;
  Statement select(db_, all ? "SELECT job FROM jobs ORDER BY seq"
                            : "SELECT job FROM jobs WHERE state = ? ORDER BY seq");
  PT_RETURN_IF_ERROR(select.status("prepare list"));
  if (!all) select.BindInt(1, state);
  std::vector<v1::Job> jobs;
  for (;;) {
    const int rc = select.Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqliteError(db_, "list jobs");
    PT_ASSIGN_OR_RETURN(v1::Job job, ParseJob(select.ColumnBytes(0)));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

absl::Status SqliteJobStore::PutCheckpoint(const CheckpointRecord& record) {
  absl::MutexLock lock(&mu_);
  Statement upsert(db_,
                   "INSERT OR REPLACE INTO checkpoints (job_id, step, path, complete) "
                   "VALUES (?, ?, ?, ?)");
  PT_RETURN_IF_ERROR(upsert.status("prepare checkpoint"));
  upsert.BindText(1, record.job_id);
  upsert.BindInt(2, record.step);
  upsert.BindText(3, record.path);
  upsert.BindInt(4, record.complete ? 1 : 0);
  if (upsert.Step() != SQLITE_DONE) return SqliteError(db_, "write checkpoint");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteJobStore::ListCheckpoints(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Statement select(db_,
                   "SELECT step, path, complete FROM checkpoints WHERE job_id = ? ORDER BY step");
  PT_RETURN_IF_ERROR(select.status("prepare checkpoints"));
  select.BindText(1, job_id);
  std::vector<CheckpointRecord> records;
  for (;;) {
    const int rc = select.Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqliteError(db_, "list checkpoints");
    records.push_back(CheckpointRecord{job_id, select.ColumnInt(0), select.ColumnBytes(1),
                                       select.ColumnInt(2) != 0});
  }
  return records;
}

absl::Status SqliteJobStore::SaveStepTraces(const std::string& job_id,
                                           const std::vector<v1::StepTrace>& traces) {
  absl::MutexLock lock(&mu_);
  PT_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  // One transaction: the old set is replaced completely or not at all.
  absl::Status status = [&]() -> absl::Status {
    Statement remove(db_, "DELETE FROM step_traces WHERE job_id = ?");
    PT_RETURN_IF_ERROR(remove.status("prepare step trace delete"));
    remove.BindText(1, job_id);
    if (remove.Step() != SQLITE_DONE) return SqliteError(db_, "delete step traces");
    for (const v1::StepTrace& trace : traces) {
      Statement insert(db_, "INSERT INTO step_traces (job_id, step, trace) VALUES (?, ?, ?)");
      PT_RETURN_IF_ERROR(insert.status("prepare step trace insert"));
      insert.BindText(1, job_id);
      insert.BindInt(2, trace.step());
      insert.BindBlob(3, trace.SerializeAsString());
      if (insert.Step() != SQLITE_DONE) return SqliteError(db_, "write step trace");
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    (void)Exec("ROLLBACK");
    return status;
  }
  return Exec("COMMIT");
}

absl::StatusOr<std::vector<v1::StepTrace>> SqliteJobStore::LoadStepTraces(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Statement select(db_, "SELECT trace FROM step_traces WHERE job_id = ? ORDER BY step");
  PT_RETURN_IF_ERROR(select.status("prepare step traces"));
  select.BindText(1, job_id);
  std::vector<v1::StepTrace> traces;
  for (;;) {
    const int rc = select.Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqliteError(db_, "list step traces");
    if (!traces.emplace_back().ParseFromString(select.ColumnBytes(0))) {
      return absl::DataLossError("job store: unparsable step trace row");
    }
  }
  return traces;
}

}  // namespace pipetrain::coordinator
