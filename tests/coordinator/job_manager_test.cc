// JobManager lifecycle against the fake store and fake workers: success with aggregated
// measurements, watching, queueing behind busy workers, cancel, Prepare and planning failures,
// offload planning with the measured link, bad submissions, listing. Failure recovery and
// restarts: job_recovery_test.cc.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/job_spec_validation.h"
#include "planner/planner.h"
#include "tests/coordinator/job_manager_fixture.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::AddWorker;
using ::pipetrain::testing::FakeJobStore;
using ::pipetrain::testing::FakeWorkerClient;
using ::pipetrain::testing::SmallSpec;
using ::pipetrain::testing::WaitUntil;
using ::testing::HasSubstr;

TEST_F(JobManagerTest, RunsToSucceededAndAggregatesSteps) {
  ASSERT_TRUE(StartWithTwoWorkers());
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
  EXPECT_THAT(job.measured_device_peak_bytes(), ::testing::ElementsAre(100002, 200002));
  EXPECT_DOUBLE_EQ(job.last_step_s(), 0.002);  // slowest rank
  // global batch 4 x seq_len 8 (the default 2-digit addition task: 3*2+2) per 2 ms.
  EXPECT_DOUBLE_EQ(job.tokens_per_s(), 4 * 8 / 0.002);
  EXPECT_DOUBLE_EQ(job.measured_bubble_ratio(), 1.0 - 0.5 / 2.0);
  // Step bubble: both ranks' 0.5 ms of compute against 2 ranks x the 2 ms step.
  EXPECT_DOUBLE_EQ(job.measured_step_bubble_ratio(), 1.0 - (0.5 + 0.5) / (2 * 2.0));
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
  ASSERT_TRUE(StartWithTwoWorkers());
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

TEST_F(JobManagerTest, PrepareFailureFailsJob) {
  ASSERT_TRUE(StartWithTwoWorkers());
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

// A shutdown does not wait out a slow worker's Prepare (here it would take the whole 5 s
// prepare timeout): the launch is cancelled, the job is left to resume after a restart, and the
// manager stops at once.
TEST_F(JobManagerTest, ShutdownCancelsAPrepareInFlight) {
  ASSERT_TRUE(StartWithTwoWorkers());
  FakeWorkerClient::Behavior slow;
  slow.prepare_delay = absl::Seconds(60);
  workers_.SetBehavior("127.0.0.1:20000", slow);
  const std::string id = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitUntil([&] { return workers_.prepared().size() == 2; }));
  const absl::Time start = absl::Now();
  manager_->Shutdown();
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(2)) << "Shutdown waited for the Prepare";
  EXPECT_EQ(State(id), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(manager_->Get(id).value().restarts(), 0) << "a shutdown spends no restart";
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

// Plans have stated limits: 64 workers x 65536 microbatches used to pass validation and crash
// the coordinator while planning (and again after every restart). Refused fast, naming the
// field, and the coordinator plans on. A plan under the pair limit whose encoding would still
// exceed one gRPC message is refused too.
TEST_F(JobManagerTest, PlansOverTheStatedLimitsFailNamingTheField) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::JobSpec huge = SmallSpec(64);
  huge.mutable_model()->set_num_layers(64);
  huge.mutable_training()->set_global_batch(65536);
  const std::string id = manager_->Submit(huge).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_FAILED));
  EXPECT_THAT(manager_->Get(id).value().failure_reason(),
              HasSubstr("training.global_batch: 65536 microbatches per step on 64 stages (64 "
                        "workers x 1 chunks) make 4194304 (stage, microbatch) pairs; a plan "
                        "holds at most 131072"));

  v1::JobSpec wide = SmallSpec(8);
  wide.mutable_model()->set_num_layers(8);
  wide.mutable_training()->set_global_batch(planner::kMaxPlanCells / 8);  // at the pair limit
  absl::StatusOr<v1::Plan> plan = manager_->Plan(wide);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_THAT(plan.status().message(), HasSubstr("training.global_batch: the plan of 16384 "
                                                 "microbatches on 8 stages encodes to "));
  EXPECT_THAT(plan.status().message(), HasSubstr("over the limit of 3145728 bytes"));

  const std::string ok = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitState(ok, v1::JOB_STATE_WAITING_FOR_WORKERS));
}

TEST_F(JobManagerTest, InjectedPlannerFailure) {
  JobManagerOptions options;
  options.planner = [](const v1::JobSpec&,
                       const std::optional<planner::MeasuredStageCosts>&) -> absl::StatusOr<planner::PlannedJob> {
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

  // Authenticated as a worker (the registry service does that with session tokens), a call may
  // report only for the rank that worker holds: a failure for rank 0 from rank 1's worker is
  // refused and changes nothing.
  const v1::Job running = manager_->Get(id).value();
  ASSERT_EQ(running.worker_ids_size(), 2);
  v1::ReportStepRequest failure;
  failure.set_job_id(id);
  failure.set_rank(0);
  failure.set_failure("spoofed");
  const absl::Status refused = manager_->ReportStep(failure, running.worker_ids(1)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("rank: 0 of job " + id + " is not held by worker " +
                        running.worker_ids(1)));
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  failure.set_failure("");
  failure.set_rank(1);  // its own rank: accepted
  EXPECT_TRUE(manager_->ReportStep(failure, running.worker_ids(1)).ok());
}

// Placement with fake registrations: four workers registered alternating between two hosts run
// a 2 x 2 job with each pipeline on one host (ranks 0, 1 on host a; 2, 3 on host b).
TEST_F(JobManagerTest, PlacesEachPipelineOnOneHost) {
  Make();
  const std::vector<std::string> ids = {AddWorker(*registry_, 0, v1::DEVICE_KIND_CPU, "a"),
                                        AddWorker(*registry_, 1, v1::DEVICE_KIND_CPU, "b"),
                                        AddWorker(*registry_, 2, v1::DEVICE_KIND_CPU, "a"),
                                        AddWorker(*registry_, 3, v1::DEVICE_KIND_CPU, "b")};
  ASSERT_TRUE(manager_->Start().ok());
  v1::JobSpec spec = SmallSpec(2, 2);
  spec.mutable_training()->set_global_batch(8);
  spec.mutable_parallelism()->set_data_parallel(2);
  const std::string id = manager_->Submit(spec).value().id();
  // Dispatched: the ranks are assigned and every target was asked to prepare.
  ASSERT_TRUE(WaitUntil([&] { return workers_.prepared().size() >= 4; }));
  const v1::Job job = manager_->Get(id).value();
  EXPECT_THAT(job.worker_ids(), ::testing::ElementsAre(ids[0], ids[2], ids[1], ids[3]));
  // Each target got its job rank's pipeline rank and replica.
  std::set<std::pair<int, int>> places;
  for (const v1::PrepareRequest& p : workers_.prepared()) places.insert({p.replica(), p.rank()});
  EXPECT_EQ(places, (std::set<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
}

}  // namespace
}  // namespace pipetrain::coordinator
