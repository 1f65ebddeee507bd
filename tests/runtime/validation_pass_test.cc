// Evaluation passes (docs/training.md, "Evaluation"): for every schedule, a pipeline of p
// worker threads trains a few steps and runs the job's forward-only validation plan after each;
// every validation loss must be BITWISE the single-process reference trainer's
// (ReferenceTrainer::Validate on the same held-out data), and so must every training loss (the
// validation passes change nothing). The plan is the planner's (planner::EvaluationPlan) on the
// training plan's placement. Data: the embedded addition task and a text, each split into
// training and held-out parts (worker/data), so the choice of validation windows is the one
// both sides take from data::ValidationMicrobatch.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "schedule/forward_only.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/data/addition_task.h"
#include "worker/data/text_dataset.h"
#include "worker/model/reference_trainer.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/job_config.h"
#include "worker/runtime/model_stage_runner.h"
#include "worker/transport/fake_transport.h"

namespace pipetrain::worker {
namespace {

using testing::kMicrobatchSize;

constexpr int kSteps = 2;
constexpr int kValidationBatches = 3;

// Whole-model losses of the reference trainer: per step, the training loss and the validation
// loss after it.
struct Losses {
  std::vector<double> train, validation;
};

model::GptConfig ModelFor(const data::Dataset& d, int layers) {
  model::GptConfig c = testing::SmallModel(layers);
  c.vocab = d.vocab_size();
  c.seq_len = d.seq_len();
  return c;
}

Losses Reference(const data::Dataset& train, const data::Dataset& validation,
                 const model::GptConfig& config, int m) {
  kernels::CpuBackend backend;
  model::ReferenceTrainerConfig rc;
  rc.model = config;
  rc.num_microbatches = m;
  rc.microbatch_size = kMicrobatchSize;
  rc.optimizer = testing::Constant();
  auto trainer = model::ReferenceTrainer::Create(&backend, &train, rc);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  Losses out;
  for (int step = 0; step < kSteps; ++step) {
    auto stats = (*trainer)->Step();
    EXPECT_TRUE(stats.ok()) << stats.status();
    out.train.push_back(stats->loss);
    auto val = (*trainer)->Validate(validation, kValidationBatches);
    EXPECT_TRUE(val.ok()) << val.status();
    out.validation.push_back(val->loss);
  }
  return out;
}

MicrobatchSource Source(const data::Dataset* d, bool validation) {
  return [d, validation](int step, int mb) -> absl::StatusOr<MicrobatchData> {
    data::Microbatch b = validation ? data::ValidationMicrobatch(*d, mb, kMicrobatchSize)
                                    : TrainingMicrobatch(*d, step, mb, kMicrobatchSize);
    return MicrobatchData{std::move(b.tokens), std::move(b.targets)};
  };
}

// The pipeline: per rank, a training executor and a validation executor on one runner and one
// transport endpoint, as WorkerSession builds them.
absl::StatusOr<Losses> Pipelined(const schedule::Schedule& plan,
                                 const schedule::Schedule& validation_plan,
                                 const data::Dataset& train, const data::Dataset& validation,
                                 const model::GptConfig& config) {
  const int p = plan.num_workers;
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<ModelStageRunner>> runners;
  for (int r = 0; r < p; ++r) {
    ModelStageConfig mc;
    mc.model = config;
    mc.optimizer = testing::Constant();
    mc.num_stages = plan.num_stages;
    mc.num_microbatches = plan.num_microbatches;
    for (int s = 0; s < plan.num_stages; ++s) {
      if (plan.WorkerOf(s) == r) mc.stages.push_back(s);
    }
    mc.data = Source(&train, false);
    mc.validation_data = Source(&validation, true);
    mc.validation_batches = validation_plan.num_microbatches;
    backends.push_back(std::make_unique<kernels::CpuBackend>());
    PT_ASSIGN_OR_RETURN(auto runner, ModelStageRunner::Create(backends.back().get(), mc));
    runners.push_back(std::move(runner));
  }
  FakeTransportHub hub(p);
  std::vector<absl::Status> status(p);
  const int loss_rank = plan.WorkerOf(plan.num_stages - 1);
  Losses out;
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      Executor training(plan, r, runners[r].get(), hub.endpoint(r));
      Executor validating(validation_plan, r, runners[r].get(), hub.endpoint(r));
      for (int step = 0; step < kSteps; ++step) {
        absl::StatusOr<StepResult> result = training.RunStep(step);
        if (!result.ok()) {
          status[r] = result.status();
          hub.Kill(r);
          return;
        }
        absl::StatusOr<ValidationResult> val = validating.RunValidation(step + 1);
        if (!val.ok()) {
          status[r] = val.status();
          hub.Kill(r);
          return;
        }
        if (val->loss.has_value() != (r == loss_rank) ||
            result->loss.has_value() != (r == loss_rank)) {
          status[r] = absl::InternalError("a loss on the wrong rank");
          return;
        }
        if (r == loss_rank) {
          out.train.push_back(*result->loss);
          out.validation.push_back(*val->loss);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) PT_RETURN_IF_ERROR(s);
  return out;
}

struct Case {
  std::string schedule;
  int p;
  int m;
  bool text = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " m=" << c.m << (c.text ? " text" : " addition");
}

class ValidationPassTest : public ::testing::TestWithParam<Case> {};

TEST_P(ValidationPassTest, PipelinedValidationLossEqualsReferenceBitwise) {
  const Case& c = GetParam();
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  auto compute = schedule::Generate(c.schedule, spec);
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto plan = schedule::AddTransfers(*compute);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto forward = schedule::MakeForwardOnly(plan->num_workers, plan->stage_to_worker,
                                           kValidationBatches);
  ASSERT_TRUE(forward.ok()) << forward.status();
  auto validation_plan = schedule::AddTransfers(*forward);
  ASSERT_TRUE(validation_plan.ok()) << validation_plan.status();

  std::unique_ptr<data::Dataset> train, validation;
  if (c.text) {
    std::string text;
    for (int i = 0; text.size() < 4000; ++i) {
      text += "line " + std::to_string(i * 7919 % 1000) + " of the corpus; ";
    }
    train = *data::TextDataset::FromString(text, 8, 11, data::Split::kTrain);
    validation = *data::TextDataset::FromString(text, 8, 11, data::Split::kValidation);
  } else {
    train = std::make_unique<data::AdditionTask>(2, 11, data::Split::kTrain);
    validation = std::make_unique<data::AdditionTask>(2, 11, data::Split::kValidation);
  }
  const model::GptConfig config = ModelFor(*train, plan->num_stages);
  const Losses ref = Reference(*train, *validation, config, c.m);
  auto got = Pipelined(*plan, *validation_plan, *train, *validation, config);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->validation.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(std::memcmp(&got->train[step], &ref.train[step], sizeof(double)), 0)
        << "training loss of step " << step << ": " << got->train[step] << " vs "
        << ref.train[step];
    EXPECT_EQ(std::memcmp(&got->validation[step], &ref.validation[step], sizeof(double)), 0)
        << "validation loss after step " << step + 1 << ": " << got->validation[step] << " vs "
        << ref.validation[step];
  }
  // Training moved the weights, so the two passes saw different models (not one number twice).
  EXPECT_NE(ref.validation[0], ref.validation[1]);
}

std::vector<Case> AllCases() {
  return {{"gpipe", 2, 4},          {"1f1b", 4, 6},  {"interleaved-1f1b", 2, 4},
          {"interleaved-1f1b", 4, 8}, {"zb-h1", 2, 4}, {"zb-h2", 4, 8},
          {"zb-v", 2, 4},           {"v-half", 4, 8}, {"v-min", 4, 8},
          {"v-zb", 4, 8},           {"1f1b", 2, 4, /*text=*/true},
          {"v-zb", 2, 4, /*text=*/true}};
}

INSTANTIATE_TEST_SUITE_P(Schedules, ValidationPassTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.schedule + "_p" +
                                           std::to_string(info.param.p) + "_m" +
                                           std::to_string(info.param.m) +
                                           (info.param.text ? "_text" : "_addition");
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// The executor refuses to mix the two kinds of plan.
TEST(ValidationExecutorTest, TrainingAndValidationPlansAreNotInterchangeable) {
  schedule::PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 2;
  auto plan = schedule::AddTransfers(*schedule::Generate("1f1b", spec));
  ASSERT_TRUE(plan.ok());
  auto forward = schedule::AddTransfers(*schedule::MakeForwardOnly(2, plan->stage_to_worker, 2));
  ASSERT_TRUE(forward.ok());
  auto workers = testing::MakeModelWorkers(*plan, testing::SmallModel(2), 2);
  ASSERT_TRUE(workers.ok());
  FakeTransportHub hub(2);
  Executor training(*plan, 0, workers->raw[0], hub.endpoint(0));
  Executor validating(*forward, 0, workers->raw[0], hub.endpoint(0));
  EXPECT_EQ(training.RunValidation(1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(validating.RunStep(0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(validating.RunValidation(0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::worker
