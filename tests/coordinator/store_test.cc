// JobStore: the SQLite implementation round-trips jobs and checkpoints, keeps ids monotonic and
// keeps everything across a reopen of the same file; the fake injects failures.
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "coordinator/sqlite_job_store.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"

namespace pipetrain::coordinator {
namespace {

std::string TempDb(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/store_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return path;
}

v1::Job MakeJob(v1::JobState state) {
  v1::Job job;
  *job.mutable_spec() = testing::SmallSpec();
  job.set_state(state);
  job.mutable_created()->set_unix_ns(123);
  return job;
}

TEST(JobIdTest, FormatAndParse) {
  EXPECT_EQ(JobIdFromSequence(17), "job-000017");
  EXPECT_EQ(JobIdFromSequence(1234567), "job-1234567");
  EXPECT_EQ(SequenceFromJobId("job-000017"), 17);
  EXPECT_EQ(SequenceFromJobId("job-1234567"), 1234567);
  EXPECT_FALSE(SequenceFromJobId("job-17").has_value());
  EXPECT_FALSE(SequenceFromJobId("job-0000017").has_value());
  EXPECT_FALSE(SequenceFromJobId("job-00001x").has_value());
  EXPECT_FALSE(SequenceFromJobId("job-000000").has_value());
  EXPECT_FALSE(SequenceFromJobId("").has_value());
}

TEST(SqliteJobStoreTest, RoundTripAndReopen) {
  const std::string path = TempDb("jobs.db");
  std::vector<std::string> ids;
  {
    auto store = SqliteJobStore::Open(path).value();
    for (v1::JobState s :
         {v1::JOB_STATE_QUEUED, v1::JOB_STATE_WAITING_FOR_WORKERS, v1::JOB_STATE_RUNNING}) {
      ids.push_back(store->CreateJob(MakeJob(s)).value().id());
    }
    EXPECT_EQ(ids, (std::vector<std::string>{"job-000001", "job-000002", "job-000003"}));
    v1::Job job = store->GetJob(ids[2]).value();
    job.set_state(v1::JOB_STATE_FAILED);
    job.set_failure_reason("boom");
    job.add_losses(1.5);
    job.mutable_plan()->set_schedule("1f1b");
    ASSERT_TRUE(store->UpdateJob(job).ok());
    ASSERT_TRUE(store->PutCheckpoint({ids[2], 10, "/ckpt/10", false}).ok());
    ASSERT_TRUE(store->PutCheckpoint({ids[2], 10, "/ckpt/10", true}).ok());
    ASSERT_TRUE(store->PutCheckpoint({ids[2], 5, "/ckpt/5", true}).ok());
    v1::Job missing = MakeJob(v1::JOB_STATE_QUEUED);
    missing.set_id("job-000099");
    EXPECT_EQ(store->UpdateJob(missing).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(store->GetJob("job-000099").status().code(), absl::StatusCode::kNotFound);
  }
  auto store = SqliteJobStore::Open(path).value();  // "restart"
  std::vector<v1::Job> all = store->ListJobs(v1::JOB_STATE_UNSPECIFIED).value();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(all[1].state(), v1::JOB_STATE_WAITING_FOR_WORKERS);
  EXPECT_EQ(all[2].state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(all[2].failure_reason(), "boom");
  EXPECT_EQ(all[2].plan().schedule(), "1f1b");
  EXPECT_EQ(all[0].spec().SerializeAsString(), testing::SmallSpec().SerializeAsString());
  EXPECT_EQ(store->ListJobs(v1::JOB_STATE_FAILED).value().size(), 1u);
  std::vector<CheckpointRecord> ckpts = store->ListCheckpoints(ids[2]).value();
  ASSERT_EQ(ckpts.size(), 2u);
  EXPECT_EQ(ckpts[0].step, 5);
  EXPECT_EQ(ckpts[1].path, "/ckpt/10");
  EXPECT_TRUE(ckpts[1].complete);
  // Ids keep counting after the reopen.
  EXPECT_EQ(store->CreateJob(MakeJob(v1::JOB_STATE_QUEUED)).value().id(), "job-000004");
}

TEST(SqliteJobStoreTest, ConcurrentWriters) {
  auto store = SqliteJobStore::Open(TempDb("concurrent.db"), {.fsync_every_commit = false}).value();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        v1::Job job = store->CreateJob(MakeJob(v1::JOB_STATE_QUEUED)).value();
        job.set_state(v1::JOB_STATE_CANCELLED);
        ASSERT_TRUE(store->UpdateJob(job).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(store->ListJobs(v1::JOB_STATE_CANCELLED).value().size(), 100u);
}

// One database, one store: a second Open (here in the same process; another coordinator
// alike) is refused naming this process, until the first store is gone.
TEST(SqliteJobStoreTest, SecondOpenOfADatabaseIsRefused) {
  const std::string path = TempDb("locked.db");
  auto first = SqliteJobStore::Open(path);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> second = SqliteJobStore::Open(path);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_NE(second.status().message().find(absl::StrCat(
                path, " is in use by another coordinator (process ", ::getpid(), ",")),
            std::string::npos)
      << second.status();
  first->reset();
  EXPECT_TRUE(SqliteJobStore::Open(path).ok());
  EXPECT_TRUE(SqliteJobStore::Open(":memory:").ok());  // private: never locked
  EXPECT_TRUE(SqliteJobStore::Open(":memory:").ok());
}

TEST(SqliteJobStoreTest, OpenFailsOnBadPath) {
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store =
      SqliteJobStore::Open("/nonexistent-dir/x/jobs.db");
  EXPECT_FALSE(store.ok());
}

TEST(FakeJobStoreTest, InjectsFailures) {
  testing::FakeJobStore store;
  store.FailNext(testing::FakeJobStore::Op::kCreate, 1);
  EXPECT_EQ(store.CreateJob(MakeJob(v1::JOB_STATE_QUEUED)).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.CreateJob(MakeJob(v1::JOB_STATE_QUEUED)).value().id(), "job-000001");
}

}  // namespace
}  // namespace pipetrain::coordinator
