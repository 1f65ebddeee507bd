// Data parallelism in process: d replicas of a p-worker pipeline run as d x p threads with real
// GPT chunks over one in-memory hub (job rank q * p + s), each replica on its consecutive block
// of every step's microbatches, the gradients of each stage summed across the replicas by
// ReplicaReducer. Losses and every weight of every replica must be BITWISE those of one process
// training the whole model on the whole batch, under the full recipe with clipping (some steps
// clipped, some not) and, in one case, tied embeddings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "kernels/cpu/cpu_backend.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/model/gradient_clipping.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/model_stage_runner.h"
#include "worker/runtime/replica_reducer.h"
#include "worker/transport/fake_transport.h"
#include "worker/transport/grouped_transport.h"
#include "worker/transport/replica_view_transport.h"

namespace pipetrain::worker {
namespace {

using testing::AccumulateWholeBatch;
using testing::Data;
using testing::Weights;

constexpr int kDpSteps = 3;

struct DpReference {
  std::vector<double> losses;
  std::vector<double> grad_norms;
  std::vector<bool> clipped;
  std::vector<std::vector<float>> weights;
};

// One process, the whole model, all m microbatches in order (ReferenceTrainer's arithmetic).
DpReference TrainReference(const model::GptConfig& c, int m, const model::OptimizerSettings& opt) {
  kernels::CpuBackend backend;
  auto chunk = model::GptChunk::Create(&backend, c, model::WholeModel(c));
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  auto data = Data(c);
  DpReference ref;
  for (int step = 0; step < kDpSteps; ++step) {
    EXPECT_TRUE((*chunk)->ZeroGrad().ok());
    const absl::StatusOr<double> step_loss = AccumulateWholeBatch(**chunk, data, step, m);
    EXPECT_TRUE(step_loss.ok()) << step_loss.status();
    const double loss = step_loss.value_or(0.0);
    const absl::StatusOr<model::ClipVerdict> verdict = model::ClipAndStep(**chunk, opt, step + 1);
    EXPECT_TRUE(verdict.ok()) << verdict.status();
    ref.losses.push_back(loss);
    ref.grad_norms.push_back(verdict->norm);
    ref.clipped.push_back(verdict->clipped);
  }
  ref.weights = Weights(backend, **chunk);
  return ref;
}

struct DpCase {
  std::string schedule;
  int p;
  int d;
  int m;  // microbatches per step, all replicas together
  bool tied = false;
  // The transport as NCCL builds it (grouped_transport.h): one group per replica's pipeline and
  // one per stage across the replicas, instead of one hub linking all d x p ranks.
  bool grouped = false;
};
void PrintTo(const DpCase& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " d=" << c.d << " m=" << c.m << (c.tied ? " tied" : "")
      << (c.grouped ? " grouped" : "");
}

class DataParallelTest : public ::testing::TestWithParam<DpCase> {};

TEST_P(DataParallelTest, ReplicasTrainBitwiseLikeOneProcessOnTheWholeBatch) {
  const DpCase& c = GetParam();
  const int k = c.m / c.d;
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = k;
  auto compute = schedule::Generate(c.schedule, spec);
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto plan = schedule::AddTransfers(*compute);
  ASSERT_TRUE(plan.ok()) << plan.status();
  model::GptConfig config = testing::SmallModel(plan->num_stages);
  config.tie_embeddings = c.tied;

  model::OptimizerSettings settings = testing::Recipe();
  const DpReference unclipped = TrainReference(config, c.m, settings);
  const auto [lo, hi] =
      std::minmax_element(unclipped.grad_norms.begin(), unclipped.grad_norms.end());
  settings.clip_grad_norm = (*lo + *hi) / 2;
  const DpReference ref = TrainReference(config, c.m, settings);
  ASSERT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), true), 0);
  ASSERT_NE(std::count(ref.clipped.begin(), ref.clipped.end(), false), 0);

  const int workers = c.d * c.p;
  FakeTransportHub hub(workers);
  std::vector<std::unique_ptr<FakeTransportHub>> pipeline_groups, stage_groups;
  for (int q = 0; q < c.d; ++q) pipeline_groups.push_back(std::make_unique<FakeTransportHub>(c.p));
  for (int r = 0; r < c.p; ++r) stage_groups.push_back(std::make_unique<FakeTransportHub>(c.d));
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<ModelStageRunner>> runners;
  for (int g = 0; g < workers; ++g) {
    const int q = g / c.p, r = g % c.p;
    ModelStageConfig mc;
    mc.model = config;
    mc.optimizer = settings;
    mc.num_stages = plan->num_stages;
    mc.num_microbatches = c.m;
    mc.microbatch_offset = q * k;
    for (int s = 0; s < plan->num_stages; ++s) {
      if (plan->WorkerOf(s) == r) mc.stages.push_back(s);
    }
    mc.data = Data(config);
    backends.push_back(std::make_unique<kernels::CpuBackend>());
    auto runner = ModelStageRunner::Create(backends.back().get(), mc);
    ASSERT_TRUE(runner.ok()) << runner.status();
    runners.push_back(*std::move(runner));
  }
  std::vector<std::vector<StepResult>> results(workers);
  std::vector<absl::Status> status(workers);
  std::vector<std::thread> threads;
  for (int g = 0; g < workers; ++g) {
    threads.emplace_back([&, g] {
      const int q = g / c.p, r = g % c.p;
      Transport* job = hub.endpoint(g);
      std::unique_ptr<GroupedTransport> grouped;
      if (c.grouped) {
        // Non-owning handles on the groups' endpoints.
        auto made = GroupedTransport::Create(
            q, c.d, r, c.p,
            c.p > 1 ? std::make_unique<ReplicaViewTransport>(pipeline_groups[q]->endpoint(r), 0)
                    : nullptr,
            std::make_unique<ReplicaViewTransport>(stage_groups[r]->endpoint(q), 0));
        if (!made.ok()) {
          status[g] = made.status();
          return;
        }
        grouped = *std::move(made);
        job = grouped.get();
      }
      ReplicaViewTransport view(job, q * c.p);
      std::vector<int> stages;
      for (int s = 0; s < plan->num_stages; ++s) {
        if (plan->WorkerOf(s) == r) stages.push_back(s);
      }
      ReplicaReducer reducer(ReplicaPlace{q, c.d, r, c.p}, stages, plan->num_stages - 1, k,
                             runners[g].get(), job, absl::Seconds(30));
      ExecutorOptions options;
      options.replicas = &reducer;
      Executor executor(*plan, r, runners[g].get(), &view, options);
      for (int step = 0; step < kDpSteps; ++step) {
        absl::StatusOr<StepResult> result = executor.RunStep(step);
        if (!result.ok()) {
          status[g] = result.status();
          hub.Kill(g);
          if (c.p > 1) pipeline_groups[q]->Kill(r);
          stage_groups[r]->Kill(q);
          return;
        }
        results[g].push_back(*std::move(result));
      }
      status[g] = executor.SettlePendingUpdate();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int g = 0; g < workers; ++g) ASSERT_TRUE(status[g].ok()) << "rank " << g << ": " << status[g];

  if (c.grouped) {
    // Everything moved through the groups: the gradient sums through the stage groups.
    int64_t job_hub = 0, stage = 0;
    for (int g = 0; g < workers; ++g) job_hub += hub.endpoint(g)->stats().sent_messages;
    for (int r = 0; r < c.p; ++r) {
      for (int q = 0; q < c.d; ++q) stage += stage_groups[r]->endpoint(q)->stats().sent_messages;
    }
    EXPECT_EQ(job_hub, 0);
    EXPECT_GT(stage, 0);
  }
  const int loss_rank = plan->WorkerOf(plan->num_stages - 1);
  for (int g = 0; g < workers; ++g) {
    const int q = g / c.p, r = g % c.p;
    for (int step = 0; step < kDpSteps; ++step) {
      const StepResult& res = results[g][step];
      if (q == 0 && r == loss_rank) {
        ASSERT_TRUE(res.loss.has_value());
        EXPECT_EQ(*res.loss, ref.losses[step]) << "step " << step;
      } else {
        EXPECT_FALSE(res.loss.has_value()) << "rank " << g << " step " << step;
      }
      // One sum across replicas per held stage, every step.
      EXPECT_EQ(res.reduce_timings.size(),
                static_cast<size_t>(std::count(plan->stage_to_worker.begin(),
                                               plan->stage_to_worker.end(), r)));
      if (r == plan->WorkerOf(0)) {
        ASSERT_TRUE(res.grad_norm.has_value());
        EXPECT_EQ(*res.grad_norm, ref.grad_norms[step]) << "rank " << g << " step " << step;
        EXPECT_EQ(res.grad_clipped, ref.clipped[step]);
      }
    }
  }
  // Every replica holds the reference's weights, bitwise.
  for (int q = 0; q < c.d; ++q) {
    std::vector<std::vector<float>> weights;
    for (int s = 0; s < plan->num_stages; ++s) {
      model::GptChunk* chunk = runners[q * c.p + plan->WorkerOf(s)]->chunk(s);
      ASSERT_NE(chunk, nullptr);
      for (std::vector<float>& w : Weights(*backends[q * c.p + plan->WorkerOf(s)], *chunk)) {
        weights.push_back(std::move(w));
      }
    }
    ASSERT_EQ(weights.size(), ref.weights.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      ASSERT_EQ(weights[i].size(), ref.weights[i].size());
      EXPECT_EQ(std::memcmp(weights[i].data(), ref.weights[i].data(),
                            weights[i].size() * sizeof(float)),
                0)
          << "replica " << q << " parameter " << i << " differs from the reference's";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, DataParallelTest,
    ::testing::Values(DpCase{"1f1b", 2, 2, 8}, DpCase{"v-half", 2, 2, 8}, DpCase{"zb-h1", 2, 2, 8},
                      DpCase{"1f1b", 2, 3, 12}, DpCase{"1f1b", 1, 4, 8},
                      DpCase{"1f1b", 2, 2, 8, true}, DpCase{"v-half", 4, 2, 16},
                      DpCase{"dualpipev", 2, 2, 8}, DpCase{"interleaved-zb", 2, 2, 8},
                      DpCase{"v-half", 2, 2, 8, false, true}, DpCase{"1f1b", 2, 3, 12, true, true},
                      DpCase{"1f1b", 1, 4, 8, false, true}),
    [](const ::testing::TestParamInfo<DpCase>& info) {
      std::string n =
          absl::StrCat(info.param.schedule, "_p", info.param.p, "_d", info.param.d,
                       info.param.tied ? "_tied" : "", info.param.grouped ? "_grouped" : "");
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

// A replica that never hears from the one before it fails the step naming the sum, within its
// receive timeout, rather than hanging.
TEST(ReplicaReducerTest, MissingRunningSumFailsTheStepNamingIt) {
  FakeTransportHub hub(2);
  model::GptConfig config = testing::SmallModel(1);
  ModelStageConfig mc;
  mc.model = config;
  mc.optimizer = testing::Constant();
  mc.num_stages = 1;
  mc.num_microbatches = 2;
  mc.microbatch_offset = 1;
  mc.stages = {0};
  mc.data = Data(config);
  kernels::CpuBackend backend;
  auto runner = ModelStageRunner::Create(&backend, mc);
  ASSERT_TRUE(runner.ok()) << runner.status();
  schedule::PipelineSpec spec;
  spec.num_workers = 1;
  spec.num_microbatches = 1;
  auto plan = schedule::Generate("1f1b", spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ReplicaReducer reducer(ReplicaPlace{1, 2, 0, 1}, {0}, 0, 1, runner->get(), hub.endpoint(1),
                         absl::Milliseconds(200));
  ReplicaViewTransport view(hub.endpoint(1), 1);
  ExecutorOptions options;
  options.replicas = &reducer;
  Executor executor(*plan, 0, runner->get(), &view, options);
  const absl::StatusOr<StepResult> result = executor.RunStep(0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_NE(result.status().message().find("summing stage 0's gradients across replicas"),
            std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace pipetrain::worker
