// JobManager failure handling against the fake store and fake workers: worker and step
// failures within and past the restart budget, resuming from the last complete checkpoint (never
// an interrupted one), lost, re-registered and leaving workers, and a coordinator restart that
// recovers stored jobs.
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint_layout.h"
#include "tests/coordinator/job_manager_fixture.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::AddWorker;
using ::pipetrain::testing::FakeWorkerClient;
using ::pipetrain::testing::SmallSpec;
using ::pipetrain::testing::WaitUntil;
using ::testing::HasSubstr;

TEST_F(JobManagerTest, WorkerFailureWithoutRestartsFailsJobAndAbortsOthers) {
  step_delay_ = absl::Milliseconds(5);
  ASSERT_TRUE(StartWithTwoWorkers());
  FakeWorkerClient::Behavior fail;
  fail.fail_at_step = 1;
  workers_.SetBehavior("127.0.0.1:20001", fail);
  v1::JobSpec spec = SmallSpec(2, 5);
  spec.set_max_restarts(-1);  // no recovery
  const std::string id = manager_->Submit(spec).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED));
  const v1::Job job = manager_->Get(id).value();
  EXPECT_THAT(job.failure_reason(), HasSubstr("injected failure at step 1"));
  EXPECT_THAT(job.failure_reason(), HasSubstr("rank 1"));
  EXPECT_EQ(job.restarts(), 0);
  ASSERT_TRUE(WaitUntil([&] { return workers_.abort_calls(id) == 2; }));
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 2; }));
  // The coordinator goes on: the next job runs.
  workers_.SetBehavior("127.0.0.1:20001", {});
  const std::string next = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitState(next, v1::JOB_STATE_SUCCEEDED));
}

TEST_F(JobManagerTest, RepeatedFailureRecoversUntilTheRestartBudgetIsUsedUp) {
  step_delay_ = absl::Milliseconds(2);
  ASSERT_TRUE(StartWithTwoWorkers());
  FakeWorkerClient::Behavior fail;
  fail.fail_at_step = 1;  // every attempt
  workers_.SetBehavior("127.0.0.1:20001", fail);
  v1::JobSpec spec = SmallSpec(2, 5);
  spec.set_max_restarts(2);
  const std::string id = manager_->Submit(spec).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED));
  const v1::Job job = manager_->Get(id).value();
  EXPECT_THAT(job.failure_reason(), HasSubstr("injected failure at step 1"));
  EXPECT_THAT(job.failure_reason(), HasSubstr("restart budget used up: 2 of max_restarts 2"));
  EXPECT_EQ(job.restarts(), 2);
  ASSERT_EQ(job.recoveries_size(), 2);
  for (const v1::JobRecovery& r : job.recoveries()) {
    EXPECT_TRUE(r.counted());
    EXPECT_EQ(r.resume_step(), 0);  // no checkpoints: from the start
    EXPECT_THAT(r.reason(), HasSubstr("rank 1"));
  }
  // Three attempts, each prepared on both ranks, numbered 0, 1, 2.
  std::vector<int> attempts;
  for (const v1::PrepareRequest& p : workers_.prepared()) attempts.push_back(p.attempt());
  EXPECT_THAT(attempts, ::testing::UnorderedElementsAre(0, 0, 1, 1, 2, 2));
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 2; }));
}

// A rank fails once at step 5; checkpoints every 2 steps: the job resumes at step 4 (the manifest
// names the newest complete checkpoint, older ones are pruned) and completes with every step's
// loss, the redone steps replacing the lost attempt's.
TEST_F(JobManagerTest, StepFailureResumesFromTheLastCompleteCheckpoint) {
  step_delay_ = absl::Milliseconds(2);
  ASSERT_TRUE(StartWithTwoWorkers());
  FakeWorkerClient::Behavior fail;
  fail.fail_at_step = 5;
  fail.fail_once = true;
  // The fake's ranks do not wait for each other like a pipeline: rank 1 starts late so that
  // rank 0 has reported checkpoint 4 before rank 1 fails.
  fail.start_delay = absl::Milliseconds(60);
  // Steps 1 and 4 skip their update (non-finite gradients): step 4 is done twice, counted once.
  fail.skipped_updates = {1, 4};
  fail.clipped_steps = {2, 5};  // step 5 is clipped in both attempts, counted once
  workers_.SetBehavior("127.0.0.1:20001", fail);
  FakeWorkerClient::Behavior skips;
  skips.skipped_updates = {1, 4};
  skips.clipped_steps = {2, 5};
  workers_.SetBehavior("127.0.0.1:20000", skips);
  const std::string dir = ::testing::TempDir() + "/resume-ckpt";
  std::filesystem::remove_all(dir);
  v1::JobSpec spec = SmallSpec(2, 8);
  spec.mutable_checkpoint()->set_dir(dir);
  spec.mutable_checkpoint()->set_interval_steps(2);
  spec.mutable_checkpoint()->set_keep_last(2);
  std::shared_ptr<JobWatch> watch;
  const std::string id = manager_->Submit(spec).value().id();
  watch = manager_->Watch(id).value();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED)) << manager_->Get(id)->failure_reason();
  const v1::Job job = manager_->Get(id).value();
  EXPECT_EQ(job.steps_done(), 8);
  std::vector<double> expected;
  for (int s = 0; s < 8; ++s) expected.push_back(2.0 / (s + 1));
  EXPECT_THAT(job.losses(), ::testing::ElementsAreArray(expected));
  EXPECT_THAT(job.skipped_steps(), ::testing::ElementsAre(1, 4));
  EXPECT_THAT(job.clipped_steps(), ::testing::ElementsAre(2, 5));
  std::vector<double> norms;
  for (int s = 0; s < 8; ++s) norms.push_back(1.0 + s / 4.0);
  EXPECT_THAT(job.grad_norms(), ::testing::ElementsAreArray(norms));
  EXPECT_EQ(job.restarts(), 1);
  ASSERT_EQ(job.recoveries_size(), 1);
  EXPECT_EQ(job.recoveries(0).resume_step(), 4);
  EXPECT_THAT(job.recoveries(0).reason(), HasSubstr("injected failure at step 5"));
  EXPECT_EQ(job.checkpoint_step(), 8);
  EXPECT_TRUE(job.failure_reason().empty()) << job.failure_reason();

  // The second attempt resumed from step-4 on both ranks and ran the 4 remaining steps.
  int resumed = 0;
  for (const v1::PrepareRequest& p : workers_.prepared()) {
    if (p.attempt() != 1) continue;
    ++resumed;
    EXPECT_EQ(p.start_step(), 4);
    EXPECT_EQ(p.checkpoint_path(), dir);
  }
  EXPECT_EQ(resumed, 2);
  // Manifest, store records and pruning (keep_last 2).
  absl::StatusOr<model::CheckpointManifest> manifest = model::ReadCheckpointManifest(dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->step, 8);
  EXPECT_EQ(manifest->num_stages, 2);
  std::vector<int64_t> complete;
  const std::vector<CheckpointRecord> records = store_.ListCheckpoints(id).value();
  for (const CheckpointRecord& r : records) {
    if (r.complete) complete.push_back(r.step);
    EXPECT_EQ(r.path, model::CheckpointStepDir(dir, r.step));
  }
  EXPECT_THAT(complete, ::testing::ElementsAre(2, 4, 6, 8));
  EXPECT_FALSE(std::filesystem::exists(model::CheckpointStepDir(dir, 4)));
  EXPECT_TRUE(std::filesystem::exists(model::CheckpointStepDir(dir, 6)));
  EXPECT_TRUE(std::filesystem::exists(model::CheckpointStepDir(dir, 8)));
  // Watchers saw RUNNING -> RECOVERING -> RUNNING -> SUCCEEDED, with the reason.
  std::vector<v1::JobState> states;
  std::string recovering_message;
  v1::JobEvent event;
  while (watch->Next(absl::Seconds(5), &event) == JobWatch::Result::kEvent) {
    if (event.has_step()) continue;
    if (event.job().state() == v1::JOB_STATE_RECOVERING) recovering_message = event.message();
    if (states.empty() || states.back() != event.job().state()) {
      states.push_back(event.job().state());
    }
  }
  EXPECT_THAT(states, ::testing::IsSupersetOf({v1::JOB_STATE_RUNNING, v1::JOB_STATE_RECOVERING,
                                               v1::JOB_STATE_SUCCEEDED}));
  EXPECT_THAT(recovering_message, HasSubstr("resuming from checkpoint step-4"));
  std::filesystem::remove_all(dir);
}

// Rank 1 "dies while writing" checkpoint step-6 (only a temp file; rank 0 wrote and reported
// its part): step 6 is never complete, so the job resumes from step-4, never from the torn one.
TEST_F(JobManagerTest, CheckpointInterruptedWhileWritingIsNeverUsed) {
  step_delay_ = absl::Milliseconds(2);
  ASSERT_TRUE(StartWithTwoWorkers());
  FakeWorkerClient::Behavior crash;
  crash.crash_in_checkpoint = 6;
  crash.fail_once = true;
  crash.start_delay = absl::Milliseconds(60);  // rank 0 reports checkpoints 4 and 6 first
  workers_.SetBehavior("127.0.0.1:20001", crash);
  const std::string dir = ::testing::TempDir() + "/torn-ckpt";
  std::filesystem::remove_all(dir);
  v1::JobSpec spec = SmallSpec(2, 8);
  spec.mutable_checkpoint()->set_dir(dir);
  spec.mutable_checkpoint()->set_interval_steps(2);
  const std::string id = manager_->Submit(spec).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED)) << manager_->Get(id)->failure_reason();
  const v1::Job job = manager_->Get(id).value();
  ASSERT_EQ(job.recoveries_size(), 1);
  EXPECT_EQ(job.recoveries(0).resume_step(), 4);
  for (const v1::PrepareRequest& p : workers_.prepared()) {
    if (p.attempt() == 1) {
      EXPECT_EQ(p.start_step(), 4);
    }
  }
  EXPECT_EQ(job.losses_size(), 8);
  EXPECT_EQ(job.learning_rates_size(), 8);  // one per step, the redone ones once
  EXPECT_EQ(model::ReadCheckpointManifest(dir)->step, 8);
  std::filesystem::remove_all(dir);
}

// Worker 1 goes silent mid-run: past the heartbeat deadline the job is RECOVERING; a new worker
// registers and the job resumes on worker 0 and the new one, and completes.
TEST_F(JobManagerTest, LostWorkerRecoversOnAReplacement) {
  step_delay_ = absl::Milliseconds(5);
  const std::string w0 =
      StartWithTwoStalledWorkers(/*stall_at_step=*/1, /*heartbeat=*/absl::Milliseconds(300)).w0;
  const std::string id = manager_->Submit(SmallSpec(2, 5)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING));
  // Worker 0 keeps heartbeating; worker 1 goes silent.
  ASSERT_TRUE(WaitUntil(
      [&] {
        registry_->Heartbeat(w0, id);
        return State(id) == v1::JOB_STATE_RECOVERING;
      },
      absl::Seconds(5)));
  v1::Job job = manager_->Get(id).value();
  ASSERT_EQ(job.recoveries_size(), 1);
  EXPECT_THAT(job.recoveries(0).reason(), HasSubstr("lost a worker"));
  EXPECT_THAT(job.recoveries(0).reason(), HasSubstr("worker-000002"));
  EXPECT_THAT(job.recoveries(0).reason(), HasSubstr("missed heartbeats"));
  EXPECT_EQ(job.restarts(), 1);
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().lost == 1; }));
  // A report of the lost attempt is not counted.
  v1::ReportStepRequest stale;
  stale.set_job_id(id);
  stale.set_rank(0);
  stale.set_attempt(0);
  EXPECT_TRUE(manager_->ReportStep(stale).value().cancel());

  // A replacement comes; both heartbeat from now on.
  workers_.SetBehavior("127.0.0.1:20000", {});
  const std::string w2 = AddWorker(*registry_, 2);
  ASSERT_TRUE(WaitUntil(
      [&] {
        registry_->Heartbeat(w0, "");
        registry_->Heartbeat(w2, "");
        return State(id) == v1::JOB_STATE_SUCCEEDED;
      },
      absl::Seconds(5)))
      << v1::JobState_Name(State(id));
  job = manager_->Get(id).value();
  EXPECT_EQ(job.steps_done(), 5);
  EXPECT_EQ(job.losses_size(), 5);
  EXPECT_EQ(job.learning_rates_size(), 5);
  EXPECT_THAT(job.worker_ids(), ::testing::UnorderedElementsAre(w0, w2));
}

TEST_F(JobManagerTest, ReregisteredBusyWorkerRecoversItsJob) {
  const std::string w0 = StartWithTwoStalledWorkers(/*stall_at_step=*/0).w0;
  const std::string id = manager_->Submit(SmallSpec(2, 5)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING));
  EXPECT_EQ(AddWorker(*registry_, 0), w0);  // same name keeps its id
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RECOVERING));
  EXPECT_THAT(manager_->Get(id).value().recoveries(0).reason(), HasSubstr("re-registered"));
  // The restarted worker heartbeats (it is idle again) and the job runs on.
  workers_.SetBehavior("127.0.0.1:20000", {});
  workers_.SetBehavior("127.0.0.1:20001", {});
  ASSERT_TRUE(WaitUntil([&] {
    registry_->Heartbeat(w0, "");
    return State(id) == v1::JOB_STATE_SUCCEEDED;
  }));
}

// While a job recovers, a newer job that would fit on its surviving workers does not take them.
TEST_F(JobManagerTest, RecoveringJobKeepsItsSurvivorsAheadOfNewerJobs) {
  const std::string w1 = StartWithTwoStalledWorkers(/*stall_at_step=*/0).w1;
  const std::string id = manager_->Submit(SmallSpec(2, 3)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING));
  registry_->Heartbeat(w1, id, /*leaving=*/true);
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 1; }));
  const std::string small = manager_->Submit(SmallSpec(1, 1)).value().id();
  ASSERT_TRUE(WaitState(small, v1::JOB_STATE_WAITING_FOR_WORKERS));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(State(small), v1::JOB_STATE_WAITING_FOR_WORKERS);
  EXPECT_EQ(State(id), v1::JOB_STATE_RECOVERING);
  // A replacement: the recovering job runs first, then the small one.
  workers_.SetBehavior("127.0.0.1:20000", {});
  AddWorker(*registry_, 2);
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED));
  ASSERT_TRUE(WaitState(small, v1::JOB_STATE_SUCCEEDED));
}

// A worker shutting down (SIGTERM) says so in a heartbeat: its job recovers at once.
TEST_F(JobManagerTest, LeavingWorkerRecoversItsJobAtOnce) {
  const std::string w1 = StartWithTwoStalledWorkers(/*stall_at_step=*/0).w1;
  const std::string id = manager_->Submit(SmallSpec(2, 5)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING));
  EXPECT_FALSE(registry_->Heartbeat(w1, id, /*leaving=*/true).reregister);
  EXPECT_EQ(State(id), v1::JOB_STATE_RECOVERING);  // synchronously
  EXPECT_THAT(manager_->Get(id).value().recoveries(0).reason(), HasSubstr("shutting down"));
  ASSERT_TRUE(WaitUntil([&] { return workers_.abort_calls(id) == 2; }));
  // The leaving worker is not given the job again; it waits for another.
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 1; }));
  EXPECT_EQ(registry_->CountByState().lost, 1);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(State(id), v1::JOB_STATE_RECOVERING);
}

TEST_F(JobManagerTest, RestartRecoversStoredJobs) {
  enum class Plan { kNone, kPlanned, kUnreadable };
  auto put = [&](v1::JobState state, Plan plan) {
    v1::Job job;
    *job.mutable_spec() = SmallSpec();
    job.set_state(state);
    if (plan == Plan::kPlanned) *job.mutable_plan() = planner::PlanJob(SmallSpec()).value().plan;
    if (plan == Plan::kUnreadable) job.mutable_plan()->add_workers()->add_actions();
    return store_.CreateJob(job).value().id();
  };
  const std::string running = put(v1::JOB_STATE_RUNNING, Plan::kPlanned);
  const std::string queued = put(v1::JOB_STATE_QUEUED, Plan::kNone);
  const std::string done = put(v1::JOB_STATE_SUCCEEDED, Plan::kPlanned);
  const std::string waiting = put(v1::JOB_STATE_WAITING_FOR_WORKERS, Plan::kPlanned);
  // Its checkpoints belong to its plan, so a running job whose plan cannot be read fails.
  const std::string unreadable = put(v1::JOB_STATE_RUNNING, Plan::kUnreadable);
  // Stored while PLANNING: the coordinator died planning it (a graceful stop finishes planning),
  // perhaps because of it; planned again, it could crash every restart.
  const std::string planning = put(v1::JOB_STATE_PLANNING, Plan::kNone);
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  // The running job waits to resume (no workers yet); a restart does not use its budget.
  v1::Job job = manager_->Get(running).value();
  EXPECT_EQ(job.state(), v1::JOB_STATE_RECOVERING);
  ASSERT_EQ(job.recoveries_size(), 1);
  EXPECT_EQ(job.recoveries(0).reason(), "coordinator restarted");
  EXPECT_FALSE(job.recoveries(0).counted());
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(store_.GetJob(running).value().state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(State(done), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(State(waiting), v1::JOB_STATE_WAITING_FOR_WORKERS);
  ASSERT_TRUE(WaitState(queued, v1::JOB_STATE_WAITING_FOR_WORKERS));
  EXPECT_EQ(State(unreadable), v1::JOB_STATE_FAILED);
  EXPECT_THAT(manager_->Get(unreadable).value().failure_reason(),
              HasSubstr("the stored plan is unreadable"));
  EXPECT_EQ(State(planning), v1::JOB_STATE_FAILED);
  EXPECT_THAT(manager_->Get(planning).value().failure_reason(),
              HasSubstr("stopped while planning this job"));
  EXPECT_EQ(store_.GetJob(planning).value().state(), v1::JOB_STATE_FAILED);
  // New ids continue after the stored ones.
  EXPECT_EQ(manager_->Submit(SmallSpec()).value().id(), "job-000007");
}

// A coordinator restart with a RUNNING job whose checkpoint step-4 is recorded complete: once
// workers register, it resumes there (losses of steps 0..3 kept, 4.. redone) and completes.
TEST_F(JobManagerTest, RestartResumesARunningJobFromItsCheckpoint) {
  const std::string dir = ::testing::TempDir() + "/restart-ckpt";
  std::filesystem::remove_all(dir);
  v1::JobSpec spec = SmallSpec(2, 6);
  spec.mutable_checkpoint()->set_dir(dir);
  spec.mutable_checkpoint()->set_interval_steps(2);
  v1::Job stored;
  *stored.mutable_spec() = spec;
  stored.set_state(v1::JOB_STATE_RUNNING);
  *stored.mutable_plan() = planner::PlanJob(spec).value().plan;
  stored.set_steps_done(5);
  for (int s = 0; s < 5; ++s) stored.add_losses(2.0 / (s + 1));
  stored.set_checkpoint_step(2);  // the job record lags the checkpoints table
  const std::string id = store_.CreateJob(stored).value().id();
  ASSERT_TRUE(store_.PutCheckpoint({id, 4, dir + "/step-4", true}).ok());
  ASSERT_TRUE(store_.PutCheckpoint({id, 6, dir + "/step-6", false}).ok());  // never completed

  step_delay_ = absl::Milliseconds(2);
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::Job job = manager_->Get(id).value();
  EXPECT_EQ(job.state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job.checkpoint_step(), 4);
  EXPECT_EQ(job.steps_done(), 4);
  EXPECT_EQ(job.losses_size(), 4);
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED)) << manager_->Get(id)->failure_reason();
  job = manager_->Get(id).value();
  std::vector<double> expected;
  for (int s = 0; s < 6; ++s) expected.push_back(2.0 / (s + 1));
  EXPECT_THAT(job.losses(), ::testing::ElementsAreArray(expected));
  for (const v1::PrepareRequest& p : workers_.prepared()) {
    EXPECT_EQ(p.start_step(), 4);
    EXPECT_EQ(p.checkpoint_path(), dir);
    EXPECT_EQ(p.attempt(), 1);
  }
  EXPECT_EQ(job.checkpoint_step(), 6);
  std::filesystem::remove_all(dir);
}

// A graceful coordinator shutdown aborts the running job's workers and leaves it RECOVERING in
// the store (not FAILED), so the next coordinator resumes it.
TEST_F(JobManagerTest, ShutdownLeavesRunningJobsToResume) {
  step_delay_ = absl::Milliseconds(5);
  StartWithTwoStalledWorkers(/*stall_at_step=*/2);
  const std::string id = manager_->Submit(SmallSpec(2, 5)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING));
  ASSERT_TRUE(WaitUntil([&] { return workers_.start_calls() == 2; }));
  manager_->Shutdown();
  EXPECT_EQ(workers_.abort_calls(id), 2);
  const v1::Job job = store_.GetJob(id).value();
  EXPECT_EQ(job.state(), v1::JOB_STATE_RECOVERING);
  ASSERT_EQ(job.recoveries_size(), 1);
  EXPECT_EQ(job.recoveries(0).reason(), "coordinator shutting down");
  EXPECT_TRUE(job.failure_reason().empty());
}

}  // namespace
}  // namespace pipetrain::coordinator
