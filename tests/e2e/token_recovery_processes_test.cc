// Automatic recovery on a token dataset, as real processes: a pipetrain-coordinator and two
// pipetrain-worker daemons train a "tokens" job (a corpus prepared from the repository's docs by
// `pipetrain data prepare`) with checkpoints every 2 steps and a validation pass every 4; one
// worker is killed with SIGKILL mid-run and a replacement registers; the coordinator resumes the
// job from the newest complete checkpoint, and the job ends with exactly the losses and
// validation losses of the uninterrupted single-process reference (bitwise): the resumed run
// draws the same windows. (CheckpointResumeProcesses.TokenDatasetResumesExactly shows the same
// for workers resumed by hand with --resume-from; FaultToleranceTest runs the default task.)
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/job_client.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/wait_job.h"
#include "tests/e2e/token_corpus.h"

namespace pipetrain {
namespace {

constexpr int kSteps = 40;

testing::Process StartWorker(const std::string& dir, const std::string& coordinator,
                             const std::string& name) {
  testing::Process p = testing::Spawn(
      {PIPETRAIN_WORKER_BIN, "--coordinator", coordinator, "--name", name, "--metrics-listen", "",
       "--connect-timeout", "10", "--recv-timeout", "20", "--listen", "127.0.0.1:0",
       "--transport-listen", "127.0.0.1:0"},
      absl::StrCat(dir, "/", name));
  EXPECT_TRUE(testing::WaitForText(p.stdout_path, "listening on", absl::Seconds(20)))
      << testing::ReadFile(p.stderr_path);
  return p;
}

using testing::WaitJob;

bool Ended(const v1::Job& job) {
  return job.state() == v1::JOB_STATE_SUCCEEDED || job.state() == v1::JOB_STATE_FAILED ||
         job.state() == v1::JOB_STATE_CANCELLED;
}

TEST(TokenRecoveryProcesses, KilledWorkerIsReplacedAndTheTokenJobEndsAsIfUninterrupted) {
  const std::string dir = testing::TempDir();
  const testing::TokenCorpus corpus = testing::PrepareDocsCorpus(PIPETRAIN_CLIENT_BIN, dir, 400);
  const std::string coordinator = absl::StrCat("127.0.0.1:", testing::FreePort());
  std::vector<testing::Process> daemons;
  // Killed on every exit path (SIGKILL to a process that already ended is harmless).
  struct KillAll {
    std::vector<testing::Process>* daemons;
    ~KillAll() {
      for (testing::Process& p : *daemons) {
        testing::Kill(p, SIGKILL);
        testing::WaitFor(p, absl::Seconds(5));
      }
    }
  } kill_all{&daemons};
  daemons.push_back(testing::Spawn({PIPETRAIN_COORDINATOR_BIN, "--listen", coordinator,
                                    "--metrics-listen", "", "--db", dir + "/pipetrain.db"},
                                   dir + "/coordinator"));
  ASSERT_TRUE(testing::WaitForText(daemons[0].stdout_path, "listening on", absl::Seconds(20)))
      << testing::ReadFile(daemons[0].stderr_path);
  daemons.push_back(StartWorker(dir, coordinator, "w0"));
  daemons.push_back(StartWorker(dir, coordinator, "w1"));

  v1::JobSpec spec = testing::WithTokens(testing::SmallJob("zb-h1", 2, 4, kSteps), corpus.dir,
                                         corpus.vocab_size, "uint16", 16);
  spec.mutable_eval()->set_interval_steps(4);
  spec.mutable_eval()->set_batches(2);
  spec.mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(2);
  spec.mutable_checkpoint()->set_keep_last(2);
  client::JobClient jobs(coordinator, "", client::ClientTls{}, absl::Seconds(5));
  auto submitted = jobs.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto running = WaitJob(
      jobs, submitted->id(), [](const v1::Job& j) { return j.checkpoint_step() >= 4 || Ended(j); },
      absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->state(), v1::JOB_STATE_RUNNING) << "ended before the fault";
  testing::Kill(daemons[2], SIGKILL);  // w1
  daemons.push_back(StartWorker(dir, coordinator, "replacement"));
  auto done = WaitJob(jobs, submitted->id(), Ended, absl::Seconds(90));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->failure_reason();
  ASSERT_EQ(done->recoveries_size(), 1);
  EXPECT_GE(done->recoveries(0).resume_step(), 4);
  std::printf("killed a worker at checkpoint step %d or later; resumed from step %d\n",
              running->checkpoint_step(), done->recoveries(0).resume_step());

  const testing::ReferenceRun reference = testing::RunReference(done->spec());
  ASSERT_EQ(done->losses_size(), kSteps);
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(done->losses(s), reference.losses[s]) << "step " << s << " (bitwise)";
  }
  ASSERT_EQ(done->evaluations_size(), static_cast<int>(reference.validation.size()));
  for (const v1::EvalResult& e : done->evaluations()) {
    ASSERT_EQ(reference.validation.count(e.step()), 1u) << e.step();
    EXPECT_EQ(e.loss(), reference.validation.at(e.step())) << "validation at step " << e.step();
  }
}

}  // namespace
}  // namespace pipetrain
