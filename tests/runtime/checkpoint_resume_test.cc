// Deterministic resume: p workers (threads, real GPT chunks, in-memory transport) train 6 steps,
// every rank checkpointing its stages after step 3 completed; then FRESH runners (initialised
// from a different seed, so nothing but the checkpoint can make them right) load step-3 and
// run steps 3..5. Their losses and final weights and AdamW moments must be BITWISE those of the
// uninterrupted run. A checkpoint whose step count disagrees with the resume step is refused.
// With the full recipe (warmup, cosine over the 6 steps, every decay group) the resume lands
// mid-cosine: the resumed run must take the schedule up at step 4, not start it again. With tied
// embeddings and gradient clipping as well, both copies of the token embedding and the clipped
// updates resume exactly too.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/checkpoint_layout.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::worker {
namespace {

using testing::Data;
using testing::kMicrobatchSize;
using testing::SmallModel;

constexpr int kSteps = 6;
constexpr int kCheckpointStep = 3;  // completed steps when the checkpoint is written

struct Pipeline {
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<ModelStageRunner>> runners;
};

// Adam with a 2-step warmup and cosine decay to 0.1 x the peak over the kSteps steps, and weight
// decay on every group.
model::OptimizerSettings Scheduled() {
  model::OptimizerSettings s = testing::Recipe();
  s.lr_schedule.total_steps = kSteps;
  return s;
}

// Clipping threshold of the tied cases (the test checks that it clips some steps).
constexpr double kClipGradNorm = 0.5;

Pipeline MakePipeline(const schedule::Schedule& plan, const model::GptConfig& config, int m,
                      uint64_t seed, bool scheduled, double clip_grad_norm = 0) {
  Pipeline p;
  for (int r = 0; r < plan.num_workers; ++r) {
    ModelStageConfig mc;
    mc.model = config;
    mc.chunk.seed = seed;
    mc.optimizer.adamw = {
        .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    if (scheduled) mc.optimizer = Scheduled();
    mc.optimizer.clip_grad_norm = clip_grad_norm;
    mc.num_stages = plan.num_stages;
    mc.num_microbatches = m;
    for (int s = 0; s < plan.num_stages; ++s) {
      if (plan.WorkerOf(s) == r) mc.stages.push_back(s);
    }
    mc.data = Data(config);
    p.backends.push_back(std::make_unique<kernels::CpuBackend>());
    auto runner = ModelStageRunner::Create(p.backends.back().get(), mc);
    EXPECT_TRUE(runner.ok()) << runner.status();
    p.runners.push_back(std::move(*runner));
  }
  return p;
}

// Runs steps [first, last) on every worker thread (like WorkerSession::Run); each rank settles
// its update (post-validation, executor.h) and writes its checkpoint to `dir` after the step that
// completes `checkpoint_at` steps, and settles after the last step. Counts the clipped steps
// (the rank of stage 0 reports them) into *clipped if given. Returns the loss
// of each step (from the rank holding the last stage).
absl::StatusOr<std::vector<double>> Train(const schedule::Schedule& plan, Pipeline& p, int first,
                                          int last, const std::string& dir, int checkpoint_at,
                                          int* clipped = nullptr) {
  const int workers = plan.num_workers;
  FakeTransportHub hub(workers);
  std::vector<absl::Status> status(workers);
  std::vector<std::vector<StepResult>> results(workers);
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      Executor executor(plan, r, p.runners[r].get(), hub.endpoint(r));
      for (int step = first; step < last; ++step) {
        absl::StatusOr<StepResult> result = executor.RunStep(step);
        if (result.ok() && (step + 1 == checkpoint_at || step + 1 == last)) {
          absl::Status s = executor.SettlePendingUpdate();
          if (s.ok() && step + 1 == checkpoint_at) {
            s = p.runners[r]->SaveCheckpoint(dir, checkpoint_at);
          }
          if (!s.ok()) result = s;
        }
        if (!result.ok()) {
          status[r] = result.status();
          hub.Kill(r);
          return;
        }
        results[r].push_back(std::move(*result));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) PT_RETURN_IF_ERROR(s);
  if (clipped != nullptr) {
    for (const StepResult& r : results[plan.WorkerOf(0)]) *clipped += r.grad_clipped ? 1 : 0;
  }
  std::vector<double> losses;
  for (const StepResult& r : results[plan.WorkerOf(plan.num_stages - 1)]) {
    if (!r.loss) return absl::InternalError("no loss on the last stage's rank");
    losses.push_back(*r.loss);
  }
  return losses;
}

// Values and AdamW moments of every stage, in stage order.
std::vector<std::vector<float>> FullState(const schedule::Schedule& plan, Pipeline& p) {
  std::vector<std::vector<float>> out;
  for (int s = 0; s < plan.num_stages; ++s) {
    const int r = plan.WorkerOf(s);
    for (model::Parameter* param : p.runners[r]->chunk(s)->parameters()) {
      for (const kernels::Tensor* t : {&param->value, &param->adam_m, &param->adam_v}) {
        out.push_back(*p.backends[r]->ToVector(*t));
      }
    }
  }
  return out;
}

struct Case {
  std::string schedule;
  int p;
  int m;
  bool scheduled = false;  // the full recipe instead of a constant rate
  bool tied_clipped = false;  // + tied embeddings and clipping at kClipGradNorm
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << (c.scheduled ? " scheduled" : "");
}

class CheckpointResumeTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/resume-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(CheckpointResumeTest, ResumedRunIsBitwiseTheUninterruptedRun) {
  const Case& c = GetParam();
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  auto compute = schedule::Generate(c.schedule, spec);
  if (!compute.ok() && compute.status().message().find("unknown schedule") != std::string::npos) {
    GTEST_SKIP() << c.schedule << " is not registered in this build";
  }
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto plan = schedule::AddTransfers(*compute);
  ASSERT_TRUE(plan.ok()) << plan.status();
  model::GptConfig config = SmallModel(plan->num_stages);
  config.tie_embeddings = c.tied_clipped;
  const double clip = c.tied_clipped ? kClipGradNorm : 0;

  Pipeline full = MakePipeline(*plan, config, c.m, /*seed=*/1234, c.scheduled, clip);
  int clipped = 0;
  auto losses = Train(*plan, full, 0, kSteps, dir_, kCheckpointStep, &clipped);
  ASSERT_TRUE(losses.ok()) << losses.status();
  if (c.tied_clipped) {
    EXPECT_GT(clipped, 0);
  }
  ASSERT_EQ(losses->size(), static_cast<size_t>(kSteps));
  ASSERT_LT(losses->back(), losses->front()) << "did not train";
  ASSERT_EQ(model::LatestCompleteCheckpointStep(dir_, plan->num_stages), kCheckpointStep);

  // Fresh runners from another seed: only the checkpoint can make them match.
  Pipeline resumed = MakePipeline(*plan, config, c.m, /*seed=*/777, c.scheduled, clip);
  for (auto& runner : resumed.runners) {
    ASSERT_TRUE(runner->LoadCheckpoint(dir_, kCheckpointStep).ok());
    EXPECT_EQ(runner->optimizer_steps(), kCheckpointStep);
  }
  auto tail = Train(*plan, resumed, kCheckpointStep, kSteps, dir_, /*checkpoint_at=*/-1);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->size(), static_cast<size_t>(kSteps - kCheckpointStep));
  for (int i = 0; i < kSteps - kCheckpointStep; ++i) {
    EXPECT_EQ((*tail)[i], (*losses)[kCheckpointStep + i]) << "step " << kCheckpointStep + i;
  }
  const auto want = FullState(*plan, full);
  const auto got = FullState(*plan, resumed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0)
        << "tensor " << i << " (value/m/v of a parameter) differs";
  }

  // Resuming at a step the files do not hold is refused, naming the file.
  Pipeline wrong = MakePipeline(*plan, config, c.m, 1234, c.scheduled);
  const std::string other = dir_ + "/misnamed";
  std::filesystem::create_directories(other);
  std::filesystem::copy(model::CheckpointStepDir(dir_, kCheckpointStep),
                        model::CheckpointStepDir(other, 2));
  absl::Status s = wrong.runners[0]->LoadCheckpoint(other, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("stage-0.ckpt"), std::string::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(Schedules, CheckpointResumeTest,
                         ::testing::Values(Case{"1f1b", 2, 4}, Case{"v-half", 4, 8},
                                           Case{"1f1b", 2, 4, true}, Case{"v-half", 4, 8, true},
                                           Case{"1f1b", 4, 8, true, true},
                                           Case{"v-half", 4, 8, true, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.schedule + "_p" +
                                           std::to_string(info.param.p) +
                                           (info.param.scheduled ? "_scheduled" : "") +
                                           (info.param.tied_clipped ? "_tied_clipped" : "");
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace pipetrain::worker
