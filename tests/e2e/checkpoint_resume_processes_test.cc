// Deterministic resume with real processes: two pipetrain-worker ranks (plan file, TCP on
// loopback) train with checkpoints every 2 steps; one is killed with SIGKILL mid-run (its
// neighbour fails the step). Every rank is restarted with --resume-from the last complete
// checkpoint (a stage file cut off by the kill would be only a temp file, never picked up), and
// the resumed steps' losses equal, bitwise, those of an uninterrupted run (the reference
// trainer, which WorkerProcessesTest shows the uninterrupted pipeline matches bitwise). The same
// holds for a job on the "tokens" source.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/checkpoint_layout.h"
#include "planner/planner.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/plan_files.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/token_corpus.h"
#include "worker/service/step_line.h"

namespace pipetrain {
namespace {

// step -> printed loss.
std::map<int, std::string> Losses(const std::string& out) {
  std::map<int, std::string> losses;
  for (const auto& [step, line] : worker::ParseStepLines(out)) losses[step] = line.loss;
  return losses;
}

// Runs `spec` (checkpoints every 2 steps into `dir`/ckpt) as two worker processes, kills rank 1
// with SIGKILL once step 4's checkpoint is written, resumes every rank from the last complete
// checkpoint for kResumeSteps steps and expects the reference trainer's losses, bitwise.
// `while_running` runs (with the ranks' processes) before the kill.
void KillAndResumeExactly(v1::JobSpec spec, const std::string& dir,
                          const std::function<void(const std::vector<testing::Process>&,
                                                   const planner::PlannedJob&)>& while_running) {
  constexpr int kWorkers = 2;
  constexpr int kResumeSteps = 3;
  const std::string ckpt = dir + "/ckpt";
  spec.mutable_checkpoint()->set_dir(ckpt);
  spec.mutable_checkpoint()->set_interval_steps(2);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const int num_stages = planned->schedule.num_stages;
  const int loss_rank = planned->schedule.WorkerOf(num_stages - 1);

  // Run 1: killed mid-run once a few checkpoints exist.
  const std::string plan1 = testing::WritePlanFile(spec, planned->plan, dir + "/plan1.json");
  std::vector<testing::Process> workers;
  for (int r = 0; r < kWorkers; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan1, "--rank",
                                      std::to_string(r), "--recv-timeout", "30"},
                                     absl::StrCat(dir, "/run1.rank", r)));
  }
  // Every rank writes its own stages' files: step 4's checkpoint is complete once each has said
  // so (the loss rank alone can be ahead: a kill then found rank 1's stage missing at step 4).
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_TRUE(
        testing::WaitForText(workers[r].stdout_path, "checkpoint_step 4", absl::Seconds(60)))
        << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
  }
  if (while_running) while_running(workers, *planned);
  testing::Kill(workers[1], SIGKILL);
  for (int r = 0; r < kWorkers; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(20));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung after the kill";
    if (r == 0) {
      EXPECT_EQ(*code, 1) << testing::ReadFile(workers[r].stderr_path);
    }
  }
  const std::optional<int64_t> last = model::LatestCompleteCheckpointStep(ckpt, num_stages);
  ASSERT_TRUE(last.has_value());
  ASSERT_GE(*last, 4);
  ASSERT_EQ(*last % 2, 0);
  std::printf("killed after checkpoint step-%lld was complete; resuming there\n",
              static_cast<long long>(*last));
  const int start = static_cast<int>(*last);

  // Run 2: every rank restarts from the last complete checkpoint (fresh ports).
  const std::string plan2 = testing::WritePlanFile(spec, planned->plan, dir + "/plan2.json");
  std::vector<testing::Process> resumed;
  for (int r = 0; r < kWorkers; ++r) {
    resumed.push_back(testing::Spawn(
        {PIPETRAIN_WORKER_BIN, "--plan", plan2, "--rank", std::to_string(r), "--resume-from", ckpt,
         "--start-step", std::to_string(start), "--steps", std::to_string(kResumeSteps),
         "--connect-timeout", "20", "--recv-timeout", "30"},
        absl::StrCat(dir, "/run2.rank", r)));
  }
  for (int r = 0; r < kWorkers; ++r) {
    auto code = testing::WaitFor(resumed[r], absl::Seconds(60));
    ASSERT_TRUE(code.has_value()) << "resumed rank " << r << " hung";
    ASSERT_EQ(*code, 0) << testing::ReadFile(resumed[r].stderr_path);
  }

  v1::JobSpec uninterrupted = spec;
  uninterrupted.mutable_training()->set_steps(start + kResumeSteps);
  const std::vector<double> reference = testing::ReferenceLosses(uninterrupted);
  const std::map<int, std::string> losses =
      Losses(testing::ReadFile(resumed[loss_rank].stdout_path));
  ASSERT_EQ(losses.size(), static_cast<size_t>(kResumeSteps));
  for (int s = start; s < start + kResumeSteps; ++s) {
    ASSERT_EQ(losses.count(s), 1u) << "step " << s << " missing";
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(losses.at(s), &loss)) << losses.at(s);
    EXPECT_EQ(loss, reference[s]) << "step " << s;
  }
  // The killed run before the kill matched too (sanity: same job, same losses).
  const std::map<int, std::string> before =
      Losses(testing::ReadFile(workers[loss_rank].stdout_path));
  for (int s = 0; s < start && before.count(s); ++s) {
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(before.at(s), &loss));
    EXPECT_EQ(loss, reference[s]) << "run 1 step " << s;
  }
  std::filesystem::remove_all(ckpt);
}

TEST(CheckpointResumeProcesses, KilledWorkerResumesFromLastCheckpointExactly) {
  KillAndResumeExactly(testing::SmallJob("1f1b", 2, 4, /*steps=*/100000), testing::TempDir(),
                       nullptr);
}

// The same with a token dataset (the docs tokenized by `pipetrain data prepare`, widened to one
// uint32 file): the resumed run draws exactly the uninterrupted run's windows. On V-Half, rank 0
// holds the first and the last stage and maps the file; rank 1 holds neither and never opens it.
TEST(CheckpointResumeProcesses, TokenDatasetResumesExactly) {
  const std::string dir = testing::TempDir();
  const testing::TokenCorpus corpus = testing::PrepareDocsCorpus(PIPETRAIN_CLIENT_BIN, dir, 400);
  const std::string file = testing::WidenToUint32(corpus.dir + "/train.bin", dir + "/train32.bin");
  const v1::JobSpec spec = testing::WithTokens(testing::SmallJob("v-half", 2, 4, /*steps=*/100000),
                                               file, corpus.vocab_size, "uint32", 16);
  KillAndResumeExactly(
      spec, dir,
      [&](const std::vector<testing::Process>& workers, const planner::PlannedJob& planned) {
        ASSERT_EQ(planned.schedule.WorkerOf(0), 0);
        ASSERT_EQ(planned.schedule.WorkerOf(planned.schedule.num_stages - 1), 0);
        EXPECT_TRUE(testing::MapsFile(workers[0].pid, file)) << "rank 0 does not map " << file;
        EXPECT_FALSE(testing::MapsFile(workers[1].pid, file)) << "rank 1 opened the data";
      });
}

TEST(CheckpointResumeProcesses, ResumeFromMissingCheckpointFailsClearly) {
  v1::JobSpec spec = testing::SmallJob("1f1b", 2, 4, 4);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string dir = testing::TempDir();
  const std::string plan = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  testing::Process w =
      testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan, "--rank", "0", "--resume-from",
                      dir + "/none", "--start-step", "2", "--connect-timeout", "5"},
                     dir + "/rank0");
  auto code = testing::WaitFor(w, absl::Seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  const std::string err = testing::ReadFile(w.stderr_path);
  EXPECT_NE(err.find(dir + "/none/step-2/stage-0.ckpt"), std::string::npos) << err;
}

}  // namespace
}  // namespace pipetrain
