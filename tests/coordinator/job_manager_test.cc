// JobManager lifecycle against the fake store and fake workers: success with aggregated
// measurements, queueing behind busy workers, cancel, failure reasons (worker failure, Prepare
// failure, planning failure, lost worker, re-registered worker), restart recovery, listing.
#include "coordinator/job_manager.h"

#include <filesystem>
#include <memory>

#include "coordinator/metrics.h"
#include "coordinator/planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"
#include "worker/model/checkpoint.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::AddWorker;
using ::pipetrain::testing::FakeJobStore;
using ::pipetrain::testing::FakeWorkerClient;
using ::pipetrain::testing::SmallSpec;
using ::pipetrain::testing::WaitUntil;
using ::testing::HasSubstr;

class JobManagerTest : public ::testing::Test {
 protected:
  void Make(JobManagerOptions options = {}, absl::Duration heartbeat = absl::Seconds(30)) {
    registry_ = std::make_unique<WorkerRegistry>(WorkerRegistryOptions{heartbeat}, &metrics_);
    options.scheduler_tick = absl::Milliseconds(20);
    options.dispatch.prepare_timeout = absl::Seconds(5);
    manager_ = std::make_unique<JobManager>(&store_, registry_.get(), &workers_, &metrics_,
                                            std::move(options));
    workers_.SetAutoRun([this](const v1::ReportStepRequest& r) { return manager_->ReportStep(r); },
                        step_delay_);
  }
  void TearDown() override {
    workers_.Shutdown();
    if (manager_ != nullptr) manager_->Shutdown();
  }
  v1::JobState State(const std::string& id) { return manager_->Get(id).value().state(); }
  bool WaitState(const std::string& id, v1::JobState state,
                 absl::Duration timeout = absl::Seconds(10)) {
    return WaitUntil([&] { return State(id) == state; }, timeout);
  }

  absl::Duration step_delay_ = absl::ZeroDuration();
  FakeJobStore store_;
  FakeWorkerClient workers_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> manager_;
};

TEST_F(JobManagerTest, RunsToSucceededAndAggregatesSteps) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  v1::Job job = manager_->Submit(SmallSpec(2, 3)).value();
  EXPECT_EQ(job.id(), "job-000001");
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  ASSERT_TRUE(WaitState(job.id(), v1::JOB_STATE_SUCCEEDED));
  // The last step's report and `finished` arrive together: workers are released right after.
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 2; }));

  job = manager_->Get(job.id()).value();
  EXPECT_EQ(job.steps_done(), 3);
  EXPECT_THAT(job.losses(), ::testing::ElementsAre(2.0, 1.0, 2.0 / 3));
  EXPECT_DOUBLE_EQ(job.last_loss(), 2.0 / 3);
  EXPECT_THAT(job.measured_peak_activation_bytes(), ::testing::ElementsAre(1002, 2002));
  EXPECT_DOUBLE_EQ(job.last_step_s(), 0.002);  // slowest rank
  // global batch 4 x seq_len 8 (the default 2-digit addition task: 3*2+2) per 2 ms.
  EXPECT_DOUBLE_EQ(job.tokens_per_s(), 4 * 8 / 0.002);
  EXPECT_DOUBLE_EQ(job.measured_bubble_ratio(), 1.0 - 0.5 / 2.0);
  EXPECT_EQ(job.worker_ids_size(), 2);
  EXPECT_GT(job.plan().workers_size(), 0);

  // The dispatch followed the protocol: one PrepareRequest per rank with every peer.
  std::vector<v1::PrepareRequest> prepared = workers_.prepared();
  ASSERT_EQ(prepared.size(), 2u);
  std::set<int> ranks;
  for (const v1::PrepareRequest& p : prepared) {
    ranks.insert(p.rank());
    EXPECT_EQ(p.job_id(), job.id());
    EXPECT_EQ(p.start_step(), 0);
    EXPECT_EQ(p.plan().workers_size(), 2);
    ASSERT_EQ(p.peers_size(), 2);
    EXPECT_EQ(p.peers(0).rank(), 0);
    EXPECT_EQ(p.peers(0).address(), "127.0.0.1:30000");  // transport address
    EXPECT_EQ(p.peers(1).address(), "127.0.0.1:30001");
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(workers_.start_calls(), 2);
  // Stored too.
  EXPECT_EQ(store_.GetJob(job.id()).value().state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(JobManagerTest, WatchSeesEveryStateAndStep) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::Job job = manager_->Submit(SmallSpec(2, 4)).value();
  std::shared_ptr<JobWatch> watch = manager_->Watch(job.id()).value();
  ASSERT_TRUE(WaitState(job.id(), v1::JOB_STATE_WAITING_FOR_WORKERS));
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  std::vector<v1::JobState> states;
  std::vector<int> steps;
  v1::JobEvent event;
  while (watch->Next(absl::Seconds(10), &event) == JobWatch::Result::kEvent) {
    if (event.has_step()) {
      steps.push_back(event.step().step());
      EXPECT_TRUE(event.step().has_loss());
      EXPECT_EQ(event.job().steps_done(), event.step().step() + 1);
    } else if (states.empty() || states.back() != event.job().state()) {
      states.push_back(event.job().state());
    }
  }
  EXPECT_EQ(states.back(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(states, ::testing::IsSupersetOf({v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED}));
  EXPECT_THAT(steps, ::testing::ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(event.job().losses_size(), 4);  // the terminal event carries the loss curve
}

TEST_F(JobManagerTest, JobsQueueWhileWorkersAreBusy) {
  step_delay_ = absl::Milliseconds(30);
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  const std::string a = manager_->Submit(SmallSpec(2, 5)).value().id();
  const std::string b = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitState(a, v1::JOB_STATE_RUNNING));
  ASSERT_TRUE(WaitState(b, v1::JOB_STATE_WAITING_FOR_WORKERS));
  EXPECT_EQ(State(a), v1::JOB_STATE_RUNNING);  // b waited for a's workers
  ASSERT_TRUE(WaitState(a, v1::JOB_STATE_SUCCEEDED));
  ASSERT_TRUE(WaitState(b, v1::JOB_STATE_SUCCEEDED));
  EXPECT_EQ(manager_->Get(b).value().steps_done(), 2);
}

TEST_F(JobManagerTest, CancelQueuedAndRunningJobs) {
  step_delay_ = absl::Milliseconds(20);
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  const std::string queued = manager_->Submit(SmallSpec(2, 3)).value().id();
  v1::Job cancelled = manager_->Cancel(queued).value();
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(cancelled.failure_reason(), HasSubstr("cancel"));
  EXPECT_EQ(manager_->Cancel(queued).value().state(), v1::JOB_STATE_CANCELLED);  // idempotent

  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 2;  // keeps running until aborted
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
  const std::string running = manager_->Submit(SmallSpec(2, 10)).value().id();
  ASSERT_TRUE(WaitUntil([&] { return manager_->Get(running).value().steps_done() >= 1; }));
  EXPECT_EQ(manager_->Cancel(running).value().state(), v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(WaitUntil([&] { return workers_.abort_calls(running) == 2; }));
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 2; }));
  // Reports after the cancel are told to stop.
  v1::ReportStepRequest late;
  late.set_job_id(running);
  late.set_rank(0);
  EXPECT_TRUE(manager_->ReportStep(late).value().cancel());

  // A finished job cannot be cancelled.
  workers_.SetBehavior("127.0.0.1:20000", {});
  workers_.SetBehavior("127.0.0.1:20001", {});
  const std::string done = manager_->Submit(SmallSpec(2, 1)).value().id();
  ASSERT_TRUE(WaitState(done, v1::JOB_STATE_SUCCEEDED));
  absl::StatusOr<v1::Job> again = manager_->Cancel(done);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("job_id"));
}

TEST_F(JobManagerTest, WorkerFailureWithoutRestartsFailsJobAndAbortsOthers) {
  step_delay_ = absl::Milliseconds(5);
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
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
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
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
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior fail;
  fail.fail_at_step = 5;
  fail.fail_once = true;
  // The fake's ranks do not wait for each other like a pipeline: rank 1 starts late so that
  // rank 0 has reported checkpoint 4 before rank 1 fails.
  fail.start_delay = absl::Milliseconds(60);
  workers_.SetBehavior("127.0.0.1:20001", fail);
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
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
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
    if (p.attempt() == 1) EXPECT_EQ(p.start_step(), 4);
  }
  EXPECT_EQ(job.losses_size(), 8);
  EXPECT_EQ(model::ReadCheckpointManifest(dir)->step, 8);
  std::filesystem::remove_all(dir);
}

TEST_F(JobManagerTest, PrepareFailureFailsJob) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior bad;
  bad.prepare_status = absl::InternalError("out of memory building chunks");
  workers_.SetBehavior("127.0.0.1:20000", bad);
  const std::string id = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED));
  const std::string reason = manager_->Get(id).value().failure_reason();
  EXPECT_THAT(reason, HasSubstr("Prepare failed on rank 0"));
  EXPECT_THAT(reason, HasSubstr("out of memory building chunks"));
  EXPECT_EQ(workers_.start_calls(), 0);
  ASSERT_TRUE(WaitUntil([&] { return registry_->CountByState().idle == 2; }));
}

TEST_F(JobManagerTest, PrepareRunsOnAllRanksConcurrently) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  workers_.SetPrepareBarrier(true);  // each Prepare waits for all ranks, like real workers
  for (int i = 0; i < 4; ++i) AddWorker(*registry_, i);
  v1::JobSpec spec = SmallSpec(4, 2);
  const std::string id = manager_->Submit(spec).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED)) << manager_->Get(id)->failure_reason();
}

TEST_F(JobManagerTest, PlanningFailureFailsJobWithPlannerMessage) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::JobSpec spec = SmallSpec(4, 2);
  spec.mutable_model()->set_num_layers(2);  // fewer layers than the 4 stages
  const std::string id = manager_->Submit(spec).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED));
  EXPECT_THAT(manager_->Get(id).value().failure_reason(),
              HasSubstr("planning failed: model.num_layers"));
  // The next job is planned normally.
  const std::string ok = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitState(ok, v1::JOB_STATE_WAITING_FOR_WORKERS));
}

TEST_F(JobManagerTest, InjectedPlannerFailure) {
  JobManagerOptions options;
  options.planner = [](const v1::JobSpec&,
                       const std::optional<MeasuredStageCosts>&) -> absl::StatusOr<PlannedJob> {
    return absl::ResourceExhaustedError("memory.device_budget_bytes: nothing fits");
  };
  Make(std::move(options));
  ASSERT_TRUE(manager_->Start().ok());
  const std::string id = manager_->Submit(SmallSpec()).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED));
  EXPECT_THAT(manager_->Get(id).value().failure_reason(), HasSubstr("nothing fits"));
  // The dry run names the field and says InvalidArgument.
  absl::StatusOr<v1::Plan> plan = manager_->Plan(SmallSpec());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("memory.device_budget_bytes"));
}

// Offload without a link in the spec plans with the workers' measured copy bandwidth (the
// slowest); with no worker reporting one it names the missing field.
TEST_F(JobManagerTest, OffloadPlansWithTheWorkersMeasuredLink) {
  Make();
  v1::JobSpec plain_spec = SmallSpec(4);
  plain_spec.mutable_training()->set_global_batch(8);  // 8 microbatches: 1F1B holds 4 on rank 0
  v1::JobSpec spec = plain_spec;
  spec.mutable_memory()->set_offload(v1::OFFLOAD_POLICY_FULL);
  absl::StatusOr<v1::Plan> none = manager_->Plan(spec);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("host_link_bytes_per_s"));
  // Links fast next to this tiny model's modelled compute, so the plan offloads.
  for (double bw : {4e13, 2e13}) {
    WorkerRegistration r;
    r.address = absl::StrCat("127.0.0.1:", bw > 3e13 ? 1 : 2);
    r.device = v1::DEVICE_KIND_CPU;
    r.d2h_bytes_per_s = r.h2d_bytes_per_s = bw;
    ASSERT_TRUE(registry_->Register(r).ok());
  }
  absl::StatusOr<v1::Plan> plan = manager_->Plan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<v1::Plan> plain = manager_->Plan(plain_spec);
  ASSERT_TRUE(plain.ok());
  EXPECT_LT(plan->prediction().peak_activation_bytes(0), plain->prediction().peak_activation_bytes(0))
      << plan->explanation();
}

// Worker 1 goes silent mid-run: past the heartbeat deadline the job is RECOVERING; a new worker
// registers and the job resumes on worker 0 and the new one, and completes.
TEST_F(JobManagerTest, LostWorkerRecoversOnAReplacement) {
  step_delay_ = absl::Milliseconds(5);
  Make({}, absl::Milliseconds(300));
  ASSERT_TRUE(manager_->Start().ok());
  const std::string w0 = AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 1;
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
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
  EXPECT_THAT(job.worker_ids(), ::testing::UnorderedElementsAre(w0, w2));
}

TEST_F(JobManagerTest, ReregisteredBusyWorkerRecoversItsJob) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  const std::string w0 = AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 0;
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
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
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  const std::string w1 = AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 0;
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
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
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  const std::string w1 = AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 0;
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
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

TEST_F(JobManagerTest, SubmitRejectsBadSpecsAndStoreFailures) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::JobSpec bad = SmallSpec();
  bad.mutable_training()->set_global_batch(3);  // not a multiple of the microbatch size
  bad.mutable_training()->set_microbatch_size(2);
  absl::StatusOr<v1::Job> rejected = manager_->Submit(bad);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("training.global_batch"));
  bad = SmallSpec();
  bad.set_name(std::string(1000, 'x'));
  EXPECT_THAT(manager_->Submit(bad).status().message(), HasSubstr("name"));

  store_.FailNext(FakeJobStore::Op::kCreate, 1);
  absl::StatusOr<v1::Job> failed = manager_->Submit(SmallSpec());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(manager_->List(v1::JOB_STATE_UNSPECIFIED, 0, "").value().jobs.empty());
  // Failing updates do not stop the job (logged).
  store_.FailNext(FakeJobStore::Op::kUpdate, -1);
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  const std::string id = manager_->Submit(SmallSpec()).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED));
  store_.ClearFailures();
}

TEST_F(JobManagerTest, RestartRecoversStoredJobs) {
  auto put = [&](v1::JobState state, bool with_plan) {
    v1::Job job;
    *job.mutable_spec() = SmallSpec();
    job.set_state(state);
    if (with_plan) job.mutable_plan()->add_workers()->add_actions();
    return store_.CreateJob(job).value().id();
  };
  const std::string running = put(v1::JOB_STATE_RUNNING, true);
  const std::string queued = put(v1::JOB_STATE_QUEUED, false);
  const std::string done = put(v1::JOB_STATE_SUCCEEDED, true);
  const std::string waiting = put(v1::JOB_STATE_WAITING_FOR_WORKERS, true);
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
  // New ids continue after the stored ones.
  EXPECT_EQ(manager_->Submit(SmallSpec()).value().id(), "job-000005");
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
  *stored.mutable_plan() = PlanJob(spec).value().plan;
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
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 2;
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
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

TEST_F(JobManagerTest, ListPagesAndFilters) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(manager_->Submit(SmallSpec()).value().id());
  manager_->Cancel(ids[3]).value();
  std::vector<std::string> seen;
  std::string token;
  do {
    JobPage page = manager_->List(v1::JOB_STATE_UNSPECIFIED, 3, token).value();
    EXPECT_LE(page.jobs.size(), 3u);
    for (const v1::Job& j : page.jobs) seen.push_back(j.id());
    token = page.next_page_token;
  } while (!token.empty());
  EXPECT_EQ(seen, ids);
  JobPage cancelled = manager_->List(v1::JOB_STATE_CANCELLED, 0, "").value();
  ASSERT_EQ(cancelled.jobs.size(), 1u);
  EXPECT_EQ(cancelled.jobs[0].id(), ids[3]);
  EXPECT_EQ(manager_->List(v1::JOB_STATE_UNSPECIFIED, -1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(manager_->List(v1::JOB_STATE_UNSPECIFIED, 0, "garbage").status().message(),
              HasSubstr("page_token"));
}

TEST_F(JobManagerTest, UnknownJobsAndBadReports) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  EXPECT_EQ(manager_->Get("job-000042").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager_->Get("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->Watch("job-000042").status().code(), absl::StatusCode::kNotFound);
  v1::ReportStepRequest report;
  report.set_job_id("job-000042");
  EXPECT_EQ(manager_->ReportStep(report).status().code(), absl::StatusCode::kNotFound);

  step_delay_ = absl::Milliseconds(50);
  AddWorker(*registry_, 0);
  AddWorker(*registry_, 1);
  FakeWorkerClient::Behavior stall;
  stall.stall_at_step = 0;
  workers_.SetBehavior("127.0.0.1:20000", stall);
  workers_.SetBehavior("127.0.0.1:20001", stall);
  const std::string id = manager_->Submit(SmallSpec(2, 3)).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_RUNNING));
  ASSERT_TRUE(WaitUntil([&] { return workers_.start_calls() == 2; }));
  report.set_job_id(id);
  report.set_rank(2);
  EXPECT_THAT(manager_->ReportStep(report).status().message(), HasSubstr("rank"));
  report.set_rank(0);
  report.mutable_report()->set_rank(0);
  report.mutable_report()->set_step(3);
  EXPECT_THAT(manager_->ReportStep(report).status().message(), HasSubstr("report.step"));
  report.mutable_report()->set_step(0);
  report.mutable_report()->set_rank(1);
  EXPECT_THAT(manager_->ReportStep(report).status().message(), HasSubstr("report.rank"));
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
}

}  // namespace
}  // namespace pipetrain::coordinator
