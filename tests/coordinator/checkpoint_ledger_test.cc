// CheckpointLedger: a checkpoint step is complete exactly when the last rank reports it; and
// ResumeStep takes the newest of the job record, the store's complete records and the manifest.
#include "coordinator/checkpoint_ledger.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "model/checkpoint_layout.h"
#include "tests/fakes/fake_job_store.h"

namespace pipetrain::coordinator {
namespace {

TEST(CheckpointLedgerTest, CompleteWhenEveryRankReported) {
  CheckpointLedger ledger(3);
  EXPECT_FALSE(ledger.Add(0, 2));
  EXPECT_FALSE(ledger.Add(2, 2));
  EXPECT_FALSE(ledger.Add(2, 2));  // duplicate
  EXPECT_FALSE(ledger.Add(0, 4));
  EXPECT_TRUE(ledger.Add(1, 2));
  EXPECT_FALSE(ledger.Add(1, 2));  // already complete
  EXPECT_FALSE(ledger.Add(3, 4));  // no such rank
  EXPECT_FALSE(ledger.Add(-1, 4));
  EXPECT_FALSE(ledger.Add(1, 4));
  EXPECT_TRUE(ledger.Add(2, 4));
  // A step that one rank never reported (killed while writing it) never completes; a newer one
  // still does.
  EXPECT_FALSE(ledger.Add(0, 6));
  EXPECT_FALSE(ledger.Add(1, 6));
  EXPECT_FALSE(ledger.Add(0, 8));
  EXPECT_FALSE(ledger.Add(1, 8));
  EXPECT_TRUE(ledger.Add(2, 8));
  EXPECT_FALSE(ledger.Add(2, 6));  // older than the newest complete one: ignored
}

TEST(CheckpointLedgerTest, ResumeStepTakesTheNewestSource) {
  testing::FakeJobStore store;
  const std::string dir = ::testing::TempDir() + "/ledger-ckpt";
  std::filesystem::remove_all(dir);
  v1::Job job;
  job.mutable_spec()->mutable_training()->set_steps(20);
  job.mutable_spec()->mutable_checkpoint()->set_dir(dir);
  job = store.CreateJob(job).value();
  EXPECT_EQ(ResumeStep(store, job), 0);
  job.set_checkpoint_step(2);
  EXPECT_EQ(ResumeStep(store, job), 2);
  ASSERT_TRUE(store.PutCheckpoint({job.id(), 6, dir + "/step-6", false}).ok());
  ASSERT_TRUE(store.PutCheckpoint({job.id(), 4, dir + "/step-4", true}).ok());
  EXPECT_EQ(ResumeStep(store, job), 4);  // step 6 is not complete
  // A manifest ahead of the store (killed between the two writes).
  for (int s = 0; s < 2; ++s) {
    std::filesystem::create_directories(model::CheckpointStepDir(dir, 8));
    std::ofstream(model::StageCheckpointPath(dir, 8, s)) << "x";
  }
  ASSERT_TRUE(model::WriteCheckpointManifest(dir, {8, 2}).ok());
  EXPECT_EQ(ResumeStep(store, job), 8);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain::coordinator
