// StepTraceKeeper keeps the first and the newest steps; the job manager serves them through
// GetStepTrace, persists them with the job, and serves them again after a restart; the SQLite
// store replaces a job's set atomically.
#include "coordinator/step_traces.h"

#include <memory>

#include "coordinator/job_manager.h"
#include "coordinator/metrics.h"
#include "coordinator/sqlite_job_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::StepTrace TraceOf(int step, int ranks = 2) {
  v1::StepTrace trace;
  trace.set_step(step);
  for (int r = 0; r < ranks; ++r) {
    v1::StepReport* report = trace.add_ranks();
    report->set_rank(r);
    report->set_step(step);
    v1::ActionTiming* t = report->add_timings();
    t->mutable_action()->set_kind(v1::ACTION_KIND_F);
    t->set_end_ns(1000 * (step + 1));
  }
  return trace;
}

TEST(StepTraceKeeperTest, KeepsFirstAndNewest) {
  StepTraceKeeper keeper(/*keep_first=*/2, /*keep_last=*/3);
  EXPECT_TRUE(keeper.empty());
  EXPECT_FALSE(keeper.Get(-1).has_value());
  EXPECT_FALSE(keeper.TakeChanged());
  for (int step = 0; step < 10; ++step) keeper.Add(TraceOf(step));
  EXPECT_THAT(keeper.steps(), ElementsAre(0, 1, 7, 8, 9));
  EXPECT_EQ(keeper.Get(-1)->step(), 9);
  EXPECT_EQ(keeper.Get(1)->ranks(1).timings(0).end_ns(), 2000);
  EXPECT_FALSE(keeper.Get(5).has_value());
  EXPECT_TRUE(keeper.TakeChanged());
  EXPECT_FALSE(keeper.TakeChanged());
  ASSERT_EQ(keeper.traces().size(), 5u);
  EXPECT_EQ(keeper.traces()[2].step(), 7);
  // A short job keeps everything.
  StepTraceKeeper small(2, 3);
  for (int step = 0; step < 4; ++step) small.Add(TraceOf(step));
  EXPECT_THAT(small.steps(), ElementsAre(0, 1, 2, 3));
}

TEST(SqliteStepTracesTest, SaveReplacesTheSetAndLoadsInStepOrder) {
  auto store = SqliteJobStore::Open(":memory:").value();
  ASSERT_TRUE(store->SaveStepTraces("job-000001", {TraceOf(3), TraceOf(1)}).ok());
  ASSERT_TRUE(store->SaveStepTraces("job-000002", {TraceOf(0)}).ok());
  std::vector<v1::StepTrace> loaded = store->LoadStepTraces("job-000001").value();
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].step(), 1);
  EXPECT_EQ(loaded[1].step(), 3);
  EXPECT_EQ(loaded[1].ranks(0).timings(0).end_ns(), 4000);
  ASSERT_TRUE(store->SaveStepTraces("job-000001", {TraceOf(4)}).ok());
  loaded = store->LoadStepTraces("job-000001").value();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].step(), 4);
  EXPECT_EQ(store->LoadStepTraces("job-000002").value().size(), 1u);
  EXPECT_TRUE(store->LoadStepTraces("job-000009").value().empty());
}

class JobManagerTraceTest : public ::testing::Test {
 protected:
  void Make() {
    registry_ = std::make_unique<WorkerRegistry>(WorkerRegistryOptions{absl::Seconds(30)},
                                                 &metrics_);
    JobManagerOptions options;
    options.scheduler_tick = absl::Milliseconds(20);
    manager_ = std::make_unique<JobManager>(&store_, registry_.get(), &workers_, &metrics_,
                                            std::move(options));
    workers_.SetAutoRun([this](const v1::ReportStepRequest& r) { return manager_->ReportStep(r); },
                        absl::ZeroDuration());
  }
  void TearDown() override {
    workers_.Shutdown();
    if (manager_ != nullptr) manager_->Shutdown();
  }

  FakeJobStore store_;
  FakeWorkerClient workers_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> manager_;
};

TEST_F(JobManagerTraceTest, ServesKeptStepsAndKeepsThemAcrossARestart) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  const std::string id = manager_->Submit(SmallSpec(2, 8)).value().id();
  EXPECT_THAT(manager_->GetStepTrace(id, -1).status().message(), HasSubstr("no measured step"));
  ASSERT_TRUE(WaitUntil(
      [&] { return manager_->Get(id).value().state() == v1::JOB_STATE_SUCCEEDED; }));

  v1::StepTrace newest = manager_->GetStepTrace(id, -1).value();
  EXPECT_EQ(newest.job_id(), id);
  EXPECT_EQ(newest.step(), 7);
  EXPECT_THAT(newest.kept_steps(), ElementsAre(0, 1, 5, 6, 7));
  ASSERT_EQ(newest.ranks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(newest.ranks(r).rank(), r);
    EXPECT_EQ(newest.ranks(r).step(), 7);
    ASSERT_EQ(newest.ranks(r).timings_size(), 1);  // timings are kept (the fake sends one F)
    EXPECT_EQ(newest.ranks(r).timings(0).end_ns(), 500000);
  }
  EXPECT_EQ(manager_->GetStepTrace(id, 1).value().step(), 1);
  const absl::Status missing = manager_->GetStepTrace(id, 3).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("kept steps: 0, 1, 5, 6, 7"));
  EXPECT_EQ(manager_->GetStepTrace(id, -2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(manager_->GetStepTrace(id, -2).status().message(), HasSubstr("step"));
  EXPECT_EQ(manager_->GetStepTrace("job-000099", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager_->GetStepTrace("nope", 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A new coordinator on the same store serves the same traces.
  workers_.Shutdown();
  manager_->Shutdown();
  manager_.reset();
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::StepTrace after = manager_->GetStepTrace(id, -1).value();
  EXPECT_EQ(after.step(), 7);
  EXPECT_THAT(after.kept_steps(), ElementsAre(0, 1, 5, 6, 7));
  EXPECT_EQ(after.ranks(1).timings(0).end_ns(), 500000);
}

}  // namespace
}  // namespace pipetrain::coordinator
