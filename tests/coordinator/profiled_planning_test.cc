// Planning with the workers' profiled costs: the planner uses measured stage times as they are
// for the profiled stage count and scales the analytic FLOPs per action kind otherwise; the job
// manager asks for the profiling step at Prepare, stores the re-planned job (costs_measured),
// re-prepares the workers only when the schedule changed, and skips it all for analytic_costs.
#include <algorithm>
#include <memory>

#include "coordinator/job_manager.h"
#include "coordinator/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cost_model.h"
#include "model/job_model.h"
#include "planner/planner.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::AddWorker;
using ::pipetrain::testing::FakeJobStore;
using ::pipetrain::testing::FakeWorkerClient;
using ::pipetrain::testing::SmallSpec;
using ::pipetrain::testing::WaitUntil;
using ::testing::HasSubstr;

planner::MeasuredStageCosts Measured(int stages, double f, double b, double w) {
  planner::MeasuredStageCosts m;
  m.num_stages = stages;
  for (int s = 0; s < stages; ++s) {
    m.forward_s.push_back(f * (s + 1));
    m.backward_input_s.push_back(b * (s + 1));
    m.backward_weight_s.push_back(w * (s + 1));
  }
  return m;
}

TEST(ProfiledPlannerTest, UsesMeasuredTimesForTheProfiledStageCount) {
  const v1::JobSpec spec = SmallSpec(2, 3);  // 1F1B: 2 stages
  const planner::PlannedJob analytic = planner::PlanJob(spec).value();
  EXPECT_FALSE(analytic.plan.costs_measured());
  EXPECT_THAT(analytic.plan.explanation(), HasSubstr("costs analytic"));

  planner::PlannerOptions options;
  options.measured = Measured(2, 0.010, 0.020, 0.005);
  const planner::PlannedJob measured = planner::PlanJob(spec, options).value();
  EXPECT_TRUE(measured.plan.costs_measured());
  EXPECT_THAT(measured.plan.explanation(), HasSubstr("measured by the workers' profiling step"));
  ASSERT_EQ(measured.plan.costs_size(), 2);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(measured.plan.costs(s).forward_s(), 0.010 * (s + 1));
    EXPECT_EQ(measured.plan.costs(s).backward_input_s(), 0.020 * (s + 1));
    EXPECT_EQ(measured.plan.costs(s).backward_weight_s(), 0.005 * (s + 1));
    // Memory stays analytic (exact bytes).
    EXPECT_EQ(measured.plan.costs(s).activation_bytes(), analytic.plan.costs(s).activation_bytes());
  }
  // The prediction is the simulation with those times: 1F1B on 2 workers, 6 microbatches (4/1
  // per... here global 4 / microbatch 1 = 4 microbatches); busiest worker = stage 1.
  EXPECT_GT(measured.plan.prediction().makespan_s(), analytic.plan.prediction().makespan_s());
  EXPECT_GE(measured.plan.prediction().makespan_s(), 4 * (0.020 + 0.040 + 0.010));
}

// A job without a byte budget on devices of known memory gets the device's memory less the
// parameter state a worker holds; a model whose state alone does not fit is refused.
TEST(DeviceMemoryPlannerTest, BudgetIsTheDeviceLessTheParameterState) {
  v1::JobSpec spec = SmallSpec(2, 3);
  spec.mutable_parallelism()->set_schedule("gpipe");  // peak grows with m: a budget binds
  spec.mutable_training()->set_global_batch(16);
  const planner::PlannedJob unlimited = planner::PlanJob(spec).value();
  const double gpipe_peak = *std::max_element(unlimited.sim.peak_memory.begin(),
                                              unlimited.sim.peak_memory.end());
  // Parameter state of the 2-way split's first and last stages (the bound the planner uses).
  const model::GptConfig config = model::ModelConfig(spec).value();
  const std::vector<model::ChunkSpec> split = model::SplitEvenly(config, 2).value();
  const int64_t parameters =
      model::EstimateChunkCost(config, split[0], 1).parameter_state_bytes +
      model::EstimateChunkCost(config, split[1], 1).parameter_state_bytes;
  planner::PlannerOptions options;
  options.device_memory_bytes = parameters + static_cast<int64_t>(gpipe_peak / 2);
  absl::StatusOr<planner::PlannedJob> tight = planner::PlanJob(spec, options);
  EXPECT_EQ(tight.status().code(), absl::StatusCode::kResourceExhausted) << tight.status();
  EXPECT_THAT(std::string(tight.status().message()), HasSubstr("over the budget of"));
  // With auto the same memory is enough: it picks a schedule that fits.
  spec.mutable_parallelism()->set_schedule("auto");
  absl::StatusOr<planner::PlannedJob> fits = planner::PlanJob(spec, options);
  ASSERT_TRUE(fits.ok()) << fits.status();
  for (double peak : fits->sim.peak_memory) EXPECT_LE(peak, gpipe_peak / 2);
  EXPECT_THAT(fits->plan.explanation(), HasSubstr("less parameters, gradients and optimizer"));
  // An explicit budget wins over the device's memory.
  spec.mutable_memory()->set_device_budget_bytes(static_cast<int64_t>(gpipe_peak) * 2);
  spec.mutable_parallelism()->set_schedule("gpipe");
  EXPECT_TRUE(planner::PlanJob(spec, options).ok());
  // Parameter state alone over the device: refused, naming the field and the bytes.
  spec.mutable_memory()->set_device_budget_bytes(0);
  options.device_memory_bytes = parameters / 2;
  absl::StatusOr<planner::PlannedJob> too_big = planner::PlanJob(spec, options);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_big.status().message()),
              HasSubstr("parameters, gradients and optimizer state take up to"));
}

TEST(ProfiledPlannerTest, ScalesAnalyticFlopsPerKindForAnotherStageCount) {
  // Profile a 4-stage split whose times are the analytic ones x 2 (F), x 3 (B), x 0.5 (W); a
  // 2-stage plan must then get its analytic times scaled by the same factors. Without a fixed
  // per-action overhead (with one, only the FLOP part scales: tests/planner/
  // action_overhead_test.cc).
  planner::PlannerOptions no_overhead;
  no_overhead.action_overhead = {};
  const planner::PlannedJob four = planner::PlanJob(SmallSpec(4, 3), no_overhead).value();
  planner::MeasuredStageCosts m;
  m.num_stages = 4;
  for (const v1::StageCost& c : four.plan.costs()) {
    m.forward_s.push_back(2.0 * c.forward_s());
    m.backward_input_s.push_back(3.0 * c.backward_input_s());
    m.backward_weight_s.push_back(0.5 * c.backward_weight_s());
  }
  const planner::PlannedJob two = planner::PlanJob(SmallSpec(2, 3), no_overhead).value();
  planner::PlannerOptions options = no_overhead;
  options.measured = m;
  const planner::PlannedJob scaled = planner::PlanJob(SmallSpec(2, 3), options).value();
  ASSERT_EQ(scaled.plan.costs_size(), 2);
  for (int s = 0; s < 2; ++s) {
    EXPECT_NEAR(scaled.plan.costs(s).forward_s(), 2.0 * two.plan.costs(s).forward_s(),
                1e-12 * two.plan.costs(s).forward_s());
    EXPECT_NEAR(scaled.plan.costs(s).backward_input_s(),
                3.0 * two.plan.costs(s).backward_input_s(),
                1e-12 * two.plan.costs(s).backward_input_s());
    EXPECT_NEAR(scaled.plan.costs(s).backward_weight_s(),
                0.5 * two.plan.costs(s).backward_weight_s(),
                1e-12 * two.plan.costs(s).backward_weight_s());
  }
}

class ProfiledJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<WorkerRegistry>(WorkerRegistryOptions{absl::Seconds(30)},
                                                 &metrics_);
    JobManagerOptions options;
    options.scheduler_tick = absl::Milliseconds(20);
    manager_ = std::make_unique<JobManager>(&store_, registry_.get(), &workers_, &metrics_,
                                            std::move(options));
    workers_.SetAutoRun([this](const v1::ReportStepRequest& r) { return manager_->ReportStep(r); },
                        absl::ZeroDuration());
    ASSERT_TRUE(manager_->Start().ok());
  }
  void TearDown() override {
    workers_.Shutdown();
    manager_->Shutdown();
  }
  v1::Job RunToEnd(const v1::JobSpec& spec) {
    const std::string id = manager_->Submit(spec).value().id();
    WaitUntil([&] { return IsTerminal(manager_->Get(id).value().state()); });
    const v1::Job job = manager_->Get(id).value();
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.failure_reason();
    return job;
  }

  FakeJobStore store_;
  FakeWorkerClient workers_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> manager_;
};

TEST_F(ProfiledJobTest, ReplansWithProfiledCostsWithoutReprepareWhenTheScheduleIsTheSame) {
  workers_.SetProfile([](int stage) { return std::array<double, 3>{0.01 * (stage + 1), 0.02, 0.03}; });
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  const v1::Job job = RunToEnd(SmallSpec(2, 3));  // 1F1B: its order does not depend on costs
  EXPECT_TRUE(job.plan().costs_measured());
  ASSERT_EQ(job.plan().costs_size(), 2);
  EXPECT_EQ(job.plan().costs(0).forward_s(), 0.01);
  EXPECT_EQ(job.plan().costs(1).forward_s(), 0.02);
  EXPECT_EQ(job.plan().costs(1).backward_weight_s(), 0.03);
  const std::vector<v1::PrepareRequest> prepared = workers_.prepared();
  ASSERT_EQ(prepared.size(), 2u);  // one Prepare per rank: same actions, no re-prepare
  for (const v1::PrepareRequest& p : prepared) EXPECT_TRUE(p.profile());
  EXPECT_EQ(store_.GetJob(job.id()).value().plan().costs_measured(), true);
}

TEST_F(ProfiledJobTest, ReprepareWithTheNewPlanWhenTheScheduleChanged) {
  // ZB-V places W with the real costs: a W 40x longer than F and B moves the Ws.
  workers_.SetProfile([](int) { return std::array<double, 3>{0.001, 0.001, 0.04}; });
  for (int i = 0; i < 2; ++i) AddWorker(*registry_, i);
  v1::JobSpec spec = SmallSpec(2, 3);
  spec.mutable_parallelism()->set_schedule("zb-v");
  spec.mutable_training()->set_global_batch(8);
  const v1::Job job = RunToEnd(spec);
  EXPECT_TRUE(job.plan().costs_measured());
  const std::vector<v1::PrepareRequest> prepared = workers_.prepared();
  ASSERT_EQ(prepared.size(), 4u) << "the profiled plan should differ from the analytic one";
  EXPECT_TRUE(prepared[0].profile());
  EXPECT_TRUE(prepared[1].profile());
  for (int i = 2; i < 4; ++i) {
    EXPECT_FALSE(prepared[i].profile());
    EXPECT_TRUE(prepared[i].plan().costs_measured());
    EXPECT_EQ(prepared[i].plan().workers(prepared[i].rank()).SerializeAsString(),
              job.plan().workers(prepared[i].rank()).SerializeAsString());
  }
  EXPECT_NE(prepared[0].plan().workers(0).SerializeAsString(),
            job.plan().workers(0).SerializeAsString());
  EXPECT_EQ(workers_.start_calls(), 2);
}

TEST_F(ProfiledJobTest, AnalyticCostsSkipTheProfilingStep) {
  workers_.SetProfile([](int) { return std::array<double, 3>{1.0, 1.0, 1.0}; });
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  v1::JobSpec spec = SmallSpec(2, 3);
  spec.mutable_parallelism()->set_analytic_costs(true);
  const v1::Job job = RunToEnd(spec);
  EXPECT_FALSE(job.plan().costs_measured());
  for (const v1::PrepareRequest& p : workers_.prepared()) EXPECT_FALSE(p.profile());
}

TEST_F(ProfiledJobTest, WorkersWithoutAProfileKeepTheAnalyticPlan) {
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  const v1::Job job = RunToEnd(SmallSpec(2, 3));
  EXPECT_FALSE(job.plan().costs_measured());
  EXPECT_EQ(workers_.prepared().size(), 2u);
}

TEST_F(ProfiledJobTest, CpuWorkersSharingAHostGetTheSharedCoreSimulation) {
  // Three CPU workers on one single-core host: the running job's plan (profiled costs) carries
  // the shared-core simulation, at least the workers' summed busy time, and the store has it.
  workers_.SetProfile([](int) { return std::array<double, 3>{0.01, 0.02, 0.01}; });
  for (int i = 0; i < 3; ++i) {
    WorkerRegistration r;
    r.name = absl::StrCat("w", i);
    r.address = absl::StrCat("127.0.0.1:", 20000 + i);
    r.device = v1::DEVICE_KIND_CPU;
    r.host = "box";
    r.cpu_cores = 1;
    r.compute_threads = 1;
    ASSERT_TRUE(registry_->Register(r).ok());
  }
  const v1::Job job = RunToEnd(SmallSpec(3, 3));
  EXPECT_TRUE(job.plan().costs_measured());
  const v1::Prediction& pred = job.plan().prediction();
  ASSERT_EQ(pred.busy_s_size(), 3);
  const double work = pred.busy_s(0) + pred.busy_s(1) + pred.busy_s(2);
  EXPECT_GE(pred.shared_cpu_step_s(), work - 1e-12);
  EXPECT_GT(pred.shared_cpu_step_s(), pred.makespan_s());
  EXPECT_THAT(pred.shared_cpu_note(), HasSubstr("3 CPU workers share 1 core on host box"));
  EXPECT_DOUBLE_EQ(store_.GetJob(job.id()).value().plan().prediction().shared_cpu_step_s(),
                   pred.shared_cpu_step_s());
}

}  // namespace
}  // namespace pipetrain::coordinator
