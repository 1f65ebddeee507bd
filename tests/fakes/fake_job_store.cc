#include "tests/fakes/fake_job_store.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace pipetrain::testing {

void FakeJobStore::FailNext(Op op, int count, absl::Status status) {
  absl::MutexLock lock(&mu_);
  failures_[op] = {count, std::move(status)};
}

void FakeJobStore::ClearFailures() {
  absl::MutexLock lock(&mu_);
  failures_.clear();
}

void FakeJobStore::SetDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

int FakeJobStore::update_count() const {
  absl::MutexLock lock(&mu_);
  return updates_;
}

absl::Status FakeJobStore::Injected(Op op) {
  if (delay_ > absl::ZeroDuration()) absl::SleepFor(delay_);
  auto it = failures_.find(op);
  if (it == failures_.end() || it->second.first == 0) return absl::OkStatus();
  if (it->second.first > 0) --it->second.first;
  return it->second.second;
}

absl::StatusOr<v1::Job> FakeJobStore::CreateJob(const v1::Job& job) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kCreate); !s.ok()) return s;
  const int64_t seq = next_seq_++;
  v1::Job stored = job;
  stored.set_id(coordinator::JobIdFromSequence(seq));
  jobs_[seq] = stored;
  return stored;
}

absl::Status FakeJobStore::UpdateJob(const v1::Job& job) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kUpdate); !s.ok()) return s;
  std::optional<int64_t> seq = coordinator::SequenceFromJobId(job.id());
  if (!seq.has_value() || !jobs_.contains(*seq)) {
    return absl::NotFoundError(absl::StrCat("fake store: no job ", job.id()));
  }
  jobs_[*seq] = job;
  ++updates_;
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> FakeJobStore::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kGet); !s.ok()) return s;
  std::optional<int64_t> seq = coordinator::SequenceFromJobId(job_id);
  if (!seq.has_value() || !jobs_.contains(*seq)) {
    return absl::NotFoundError(absl::StrCat("fake store: no job ", job_id));
  }
  return jobs_[*seq];
}

absl::StatusOr<std::vector<v1::Job>> FakeJobStore::ListJobs(v1::JobState state) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kList); !s.ok()) return s;
  std::vector<v1::Job> jobs;
  for (const auto& [seq, job] : jobs_) {
    if (state == v1::JOB_STATE_UNSPECIFIED || job.state() == state) jobs.push_back(job);
  }
  return jobs;
}

absl::Status FakeJobStore::PutCheckpoint(const coordinator::CheckpointRecord& record) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kCheckpoint); !s.ok()) return s;
  checkpoints_[{record.job_id, record.step}] = record;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<coordinator::CheckpointRecord>> FakeJobStore::ListCheckpoints(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kCheckpoint); !s.ok()) return s;
  std::vector<coordinator::CheckpointRecord> records;
  for (const auto& [key, record] : checkpoints_) {
    if (key.first == job_id) records.push_back(record);
  }
  return records;
}

absl::Status FakeJobStore::SaveStepTraces(const std::string& job_id,
                                          const std::vector<v1::StepTrace>& traces) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kStepTraces); !s.ok()) return s;
  step_traces_[job_id] = traces;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::StepTrace>> FakeJobStore::LoadStepTraces(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Injected(Op::kStepTraces); !s.ok()) return s;
  auto it = step_traces_.find(job_id);
  return it == step_traces_.end() ? std::vector<v1::StepTrace>{} : it->second;
}

}  // namespace pipetrain::testing
