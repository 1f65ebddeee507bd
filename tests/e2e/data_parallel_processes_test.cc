// Data parallelism as real worker processes over TCP on loopback: d = 2 replicas of p = 2 and
// p = 4 pipelines (1F1B and V-Half), 2p pipetrain-worker processes from one plan file
// (--rank R is the job rank: replica R / p, pipeline rank R % p). With the full training recipe,
// gradient clipping that clips some steps and not others and tied embeddings, the rank of
// replica 0 that holds the last stage reports exactly (bitwise) the reference trainer's losses on
// the whole global batch, every other rank reports none, the gradient norms are the reference's,
// each rank's peak activation bytes are the planner's prediction for its pipeline rank, and the
// checkpoint after the last step (one copy per stage, written by replica 0) holds bitwise the
// reference's weights. A worker of replica 1 killed with SIGKILL mid-run: the run resumed from
// the last checkpoint ends bitwise as the uninterrupted one.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "model/checkpoint_layout.h"
#include "planner/planner.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/plan_files.h"
#include "tests/e2e/process_util.h"
#include "worker/service/step_line.h"

namespace pipetrain {
namespace {

constexpr int kSteps = 4;
constexpr int kReplicas = 2;

struct Case {
  std::string schedule;
  int p;
  int m;  // microbatches per step over both replicas
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " d=" << kReplicas;
}

// Runs job ranks 0..d*p-1 of `plan_path` to completion (extra arguments for every rank);
// returns their processes.
std::vector<testing::Process> RunAll(const std::string& plan_path, int ranks,
                                     const std::string& dir, const std::string& tag,
                                     const std::vector<std::string>& extra = {}) {
  std::vector<testing::Process> workers;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> args = {PIPETRAIN_WORKER_BIN,
                                     "--plan",
                                     plan_path,
                                     "--rank",
                                     std::to_string(r),
                                     "--connect-timeout",
                                     "20",
                                     "--recv-timeout",
                                     "30",
                                     "--report",
                                     absl::StrCat(dir, "/", tag, "report", r, ".jsonl")};
    args.insert(args.end(), extra.begin(), extra.end());
    workers.push_back(testing::Spawn(args, absl::StrCat(dir, "/", tag, "rank", r)));
  }
  return workers;
}

void ExpectBitwise(const std::vector<std::vector<float>>& got,
                   const std::vector<std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << "parameter " << i;
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)), 0)
        << "parameter " << i << " differs";
  }
}

class DataParallelProcessesTest : public ::testing::TestWithParam<Case> {};

TEST_P(DataParallelProcessesTest, TrainsExactlyLikeTheReferenceOnTheGlobalBatch) {
  const Case& c = GetParam();
  const std::string dir = testing::TempDir();
  v1::JobSpec base = testing::WithRecipe(testing::SmallJob(c.schedule, c.p, c.m, kSteps));
  base.mutable_model()->set_tie_embeddings(true);
  v1::JobSpec spec = testing::WithClipping(base);
  spec.mutable_parallelism()->set_data_parallel(kReplicas);
  spec.mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(kSteps);  // once, after the last step
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_EQ(planned->schedule.num_microbatches, c.m / kReplicas);
  const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  const int ranks = kReplicas * c.p;
  std::vector<testing::Process> workers = RunAll(plan_path, ranks, dir, "");
  for (int r = 0; r < ranks; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(150));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
  }
  // The reference: one process, the whole model, all c.m microbatches of every step.
  const testing::ReferenceRun ref = testing::RunReference(spec);
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), true), 0) << "no step clipped";
  ASSERT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), false), 0) << "all clipped";
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  for (int r = 0; r < ranks; ++r) {
    auto steps = worker::ParseStepLines(testing::ReadFile(workers[r].stdout_path));
    ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps)) << "rank " << r;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(steps[s].peak_activation_bytes,
                std::llround(planned->sim.peak_memory[r % c.p]))
          << "rank " << r << " step " << s << ": measured vs predicted peak activation bytes";
      if (r == loss_rank) {  // replica 0
        double loss = 0;
        ASSERT_TRUE(absl::SimpleAtod(steps[s].loss, &loss)) << steps[s].loss;
        EXPECT_EQ(loss, ref.losses[s]) << "step " << s;
      } else {
        EXPECT_EQ(steps[s].loss, "null") << "rank " << r << " step " << s;
      }
    }
  }
  // Every replica's rank of stage 0 knows the norm of the summed gradients: the reference's.
  for (int q = 0; q < kReplicas; ++q) {
    const int verdict_rank = q * c.p + planned->schedule.WorkerOf(0);
    const std::vector<std::string> report = absl::StrSplit(
        testing::ReadFile(absl::StrCat(dir, "/report", verdict_rank, ".jsonl")), '\n',
        absl::SkipEmpty());
    ASSERT_EQ(report.size(), static_cast<size_t>(kSteps));
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NE(report[s].find(absl::StrCat("\"grad_norm\":",
                                            absl::StrFormat("%.17g", ref.grad_norms[s]), ",")),
                std::string::npos)
          << "replica " << q << " step " << s << ": " << report[s];
    }
  }
  ExpectBitwise(testing::CheckpointWeights(spec, dir + "/ckpt", kSteps,
                                           planned->schedule.num_stages),
                ref.weights);
}

INSTANTIATE_TEST_SUITE_P(Schedules, DataParallelProcessesTest,
                         ::testing::Values(Case{"1f1b", 2, 8}, Case{"1f1b", 4, 16},
                                           Case{"v-half", 2, 8}, Case{"v-half", 4, 16}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = absl::StrCat(info.param.schedule, "_p", info.param.p,
                                                        "_d", kReplicas);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// kill -9 of a worker of replica 1 mid-run: its pipeline neighbours and its replica peers fail
// promptly; every rank restarted from the newest complete checkpoint (replica 0 wrote it) ends
// with bitwise the weights of the uninterrupted run, which are the reference's.
TEST(DataParallelProcesses, ReplicaOneWorkerKilledResumesBitwise) {
  constexpr int kP = 2, kLongSteps = 30, kInterval = 2;
  const std::string dir = testing::TempDir();
  v1::JobSpec spec = testing::WithRecipe(testing::SmallJob("1f1b", kP, 8, kLongSteps));
  spec.mutable_parallelism()->set_data_parallel(kReplicas);
  spec.mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(kInterval);
  spec.mutable_checkpoint()->set_keep_last(100);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string plan_path = testing::WritePlanFile(spec, planned->plan, dir + "/plan.json");
  const int ranks = kReplicas * kP;
  const int victim = 1 * kP + 1;  // replica 1, pipeline rank 1
  std::vector<testing::Process> first = RunAll(plan_path, ranks, dir, "a");
  // Let it pass a checkpoint, then kill the victim.
  ASSERT_TRUE(testing::WaitForText(first[victim].stdout_path, "step 3 ", absl::Seconds(90)))
      << testing::ReadFile(first[victim].stderr_path);
  testing::Kill(first[victim], SIGKILL);
  for (int r = 0; r < ranks; ++r) {
    auto code = testing::WaitFor(first[r], absl::Seconds(40));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung after replica 1's worker died";
    if (r != victim && code == 0) {
      // A rank may finish only if the run got to its end before the kill, which it must not.
      ADD_FAILURE() << "rank " << r << " finished although a peer was killed";
    }
  }
  // The newest complete checkpoint: every stage file of step-N present.
  int resume = 0;
  for (int n = kInterval; n < kLongSteps; n += kInterval) {
    bool complete = true;
    for (int s = 0; s < planned->schedule.num_stages; ++s) {
      complete = complete && std::filesystem::exists(
                                 model::StageCheckpointPath(dir + "/ckpt", n, s));
    }
    if (complete) resume = n;
  }
  ASSERT_GT(resume, 0) << "no complete checkpoint before the kill";
  std::vector<testing::Process> second =
      RunAll(plan_path, ranks, dir, "b",
             {"--resume-from", dir + "/ckpt", "--start-step", std::to_string(resume)});
  for (int r = 0; r < ranks; ++r) {
    auto code = testing::WaitFor(second[r], absl::Seconds(120));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung after the resume";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(second[r].stderr_path);
  }
  const testing::ReferenceRun ref = testing::RunReference(spec);
  // The resumed run's losses are the reference's from the resume point on.
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  auto steps = worker::ParseStepLines(testing::ReadFile(second[loss_rank].stdout_path));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kLongSteps - resume));
  for (int step = resume; step < kLongSteps; ++step) {  // step lines by their step number
    ASSERT_EQ(steps.count(step), 1u) << "step " << step;
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(steps[step].loss, &loss)) << steps[step].loss;
    EXPECT_EQ(loss, ref.losses[step]) << "step " << step;
  }
  ExpectBitwise(testing::CheckpointWeights(spec, dir + "/ckpt", kLongSteps,
                                           planned->schedule.num_stages),
                ref.weights);
}

}  // namespace
}  // namespace pipetrain
