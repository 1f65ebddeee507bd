// The training recipe with the DEFAULT weight-decay groups, as real worker processes, for every
// registered fixed schedule at p = 2 and p = 4 (WorkerProcessesTest, worker_processes_test.cc,
// decays every group and skips gpipe p = 4, zb-h2 p = 2, v-min p = 2, v-zb p = 2 and
// interleaved-group). Warmup
// then cosine decay, weight decay on the linear weights only (none on biases, LayerNorm and
// embeddings: the groups nanoGPT and Megatron use), gradient clipping by the global norm at a
// threshold that clips some steps and not others, tied input/output embeddings. The loss rank's
// losses and the last checkpoint's weights are bitwise the single-process reference trainer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "planner/planner.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/plan_files.h"
#include "tests/e2e/process_util.h"
#include "worker/service/step_line.h"

namespace pipetrain {
namespace {

constexpr int kSteps = 4;

struct Case {
  std::string schedule;
  int p;
  int m;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.schedule << " p=" << c.p; }

class RecipeGroupsProcessesTest : public ::testing::TestWithParam<Case> {};

TEST_P(RecipeGroupsProcessesTest, DefaultDecayGroupsTrainExactlyLikeTheReference) {
  const Case& c = GetParam();
  const std::string dir = testing::TempDir();
  v1::JobSpec base = testing::WithRecipe(testing::SmallJob(c.schedule, c.p, c.m, kSteps));
  v1::OptimizerSpec* o = base.mutable_training()->mutable_optimizer();
  o->set_weight_decay(0.1);
  o->set_decay_embeddings(false);  // the defaults, set explicitly: linear weights decay alone
  o->set_decay_norms_and_biases(false);
  base.mutable_model()->set_tie_embeddings(true);
  const v1::JobSpec spec = testing::WithClipping(base);
  v1::JobSpec job = spec;
  job.mutable_checkpoint()->set_dir(dir + "/ckpt");
  job.mutable_checkpoint()->set_interval_steps(kSteps);
  auto planned = planner::PlanJob(job);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::string plan = testing::WritePlanFile(job, planned->plan, dir + "/plan.json");
  std::vector<testing::Process> workers;
  for (int r = 0; r < c.p; ++r) {
    workers.push_back(testing::Spawn({PIPETRAIN_WORKER_BIN, "--plan", plan, "--rank",
                                      std::to_string(r), "--connect-timeout", "20",
                                      "--recv-timeout", "30"},
                                     absl::StrCat(dir, "/rank", r)));
  }
  for (int r = 0; r < c.p; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(100));
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung";
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
  }
  const testing::ReferenceRun ref = testing::RunReference(spec);
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), true), 0) << "no step clipped";
  EXPECT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), false), 0) << "all steps clipped";
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  auto steps = worker::ParseStepLines(testing::ReadFile(workers[loss_rank].stdout_path));
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    double loss = 0;
    ASSERT_TRUE(absl::SimpleAtod(steps[s].loss, &loss)) << steps[s].loss;
    EXPECT_EQ(loss, ref.losses[s]) << "step " << s << " (bitwise)";
  }
  const std::vector<std::vector<float>> weights =
      testing::CheckpointWeights(job, dir + "/ckpt", kSteps, planned->schedule.num_stages);
  ASSERT_EQ(weights.size(), ref.weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_EQ(weights[i].size(), ref.weights[i].size()) << "parameter " << i;
    EXPECT_EQ(std::memcmp(weights[i].data(), ref.weights[i].data(), weights[i].size() * 4), 0)
        << "parameter " << i << " differs from the reference's";
  }
  // The groups matter here: decaying every group ends elsewhere.
  v1::JobSpec all = spec;
  all.mutable_training()->mutable_optimizer()->set_decay_embeddings(true);
  all.mutable_training()->mutable_optimizer()->set_decay_norms_and_biases(true);
  const testing::ReferenceRun decay_all = testing::RunReference(all);
  ASSERT_EQ(decay_all.weights.size(), ref.weights.size());
  EXPECT_NE(decay_all.weights.front(), ref.weights.front()) << "wte: decayed only when asked";
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, RecipeGroupsProcessesTest,
    ::testing::ValuesIn([] {
      std::vector<Case> cases;
      for (const char* schedule : {"gpipe", "1f1b", "interleaved-1f1b", "interleaved-group",
                                   "zb-h1", "zb-h2", "zb-v", "v-zb", "v-half", "v-min"}) {
        cases.push_back({schedule, 2, 4});
        cases.push_back({schedule, 4, 8});
      }
      return cases;
    }()),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = absl::StrCat(info.param.schedule, "_p", info.param.p);
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace pipetrain
