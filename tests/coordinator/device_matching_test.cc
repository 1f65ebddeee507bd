// Devices in the coordinator: jobs run only on workers of the kind they ask for (all of one kind
// when they ask for none; bf16 runs on either), the transport follows the assigned devices (NCCL
// only with a GPU per rank), and for NCCL rank 0's worker makes the communicator id that every
// rank's Prepare carries. Workers are fakes: no GPU is needed.
#include <set>
#include <string>
#include <vector>

#include "coordinator/dispatcher.h"
#include "coordinator/transport_choice.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "tests/coordinator/job_manager_fixture.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::AddWorker;
using ::pipetrain::testing::FakeWorkerClient;
using ::pipetrain::testing::SmallSpec;
using ::testing::HasSubstr;

constexpr v1::DeviceKind kCpu = v1::DEVICE_KIND_CPU;
constexpr v1::DeviceKind kCuda = v1::DEVICE_KIND_CUDA;

TEST(TransportChoiceTest, NcclOnlyWithAGpuPerRank) {
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}, {kCuda, "a", 1}}), v1::TRANSPORT_KIND_NCCL);
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}, {kCuda, "b", 0}}), v1::TRANSPORT_KIND_NCCL);
  // Ranks sharing one GPU (development), any CPU rank, an unknown host, a single rank: TCP.
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}, {kCuda, "a", 0}}), v1::TRANSPORT_KIND_TCP);
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}, {kCpu, "a", 0}}), v1::TRANSPORT_KIND_TCP);
  EXPECT_EQ(ChooseTransport({{kCuda, "", 0}, {kCuda, "", 1}}), v1::TRANSPORT_KIND_TCP);
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}}), v1::TRANSPORT_KIND_TCP);
  // Data parallelism: all d x p ranks count, each on a GPU of its own.
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}, {kCuda, "a", 1}, {kCuda, "b", 0}, {kCuda, "b", 1}}),
            v1::TRANSPORT_KIND_NCCL);
  EXPECT_EQ(ChooseTransport({{kCuda, "a", 0}, {kCuda, "a", 1}, {kCuda, "b", 0}, {kCuda, "a", 1}}),
            v1::TRANSPORT_KIND_TCP);
}

class DispatcherNcclTest : public ::testing::Test {
 protected:
  v1::Job PlannedJob() {
    v1::Job job;
    job.set_id("job-000007");
    *job.mutable_spec() = SmallSpec(2, 1);
    *job.mutable_plan() = planner::PlanJob(job.spec()).value().plan;
    return job;
  }
  std::vector<DispatchTarget> Targets(std::vector<RankDevice> devices) {
    std::vector<DispatchTarget> targets;
    for (size_t r = 0; r < devices.size(); ++r) {
      targets.push_back({"worker-" + std::to_string(r), "127.0.0.1:" + std::to_string(20000 + r),
                         "127.0.0.1:" + std::to_string(30000 + r), devices[r]});
    }
    return targets;
  }
  FakeWorkerClient workers_;
  Dispatcher dispatcher_{&workers_, DispatcherOptions{}};
};

TEST_F(DispatcherNcclTest, RankZeroMakesTheIdEveryRankGets) {
  auto requests = dispatcher_.BuildPrepareRequests(
      PlannedJob(), Targets({{kCuda, "node-a", 0}, {kCuda, "node-a", 1}}));
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(workers_.nccl_id_calls(), std::vector<std::string>{"127.0.0.1:20000"});
  ASSERT_EQ(requests->size(), 2u);
  for (const v1::PrepareRequest& r : *requests) {
    EXPECT_EQ(r.transport(), v1::TRANSPORT_KIND_NCCL);
    EXPECT_EQ(r.nccl_unique_id(), "nccl-id-1-job-000007");
  }
  // Every Prepare round joins a fresh communicator.
  requests = dispatcher_.BuildPrepareRequests(
      PlannedJob(), Targets({{kCuda, "node-a", 0}, {kCuda, "node-a", 1}}));
  ASSERT_TRUE(requests.ok());
  EXPECT_EQ((*requests)[1].nccl_unique_id(), "nccl-id-2-job-000007");
}

// d = 2 replicas of a 2-rank pipeline: four communicators (two pipeline groups, two stage
// groups), each id made by the worker of the group's first member and given to its members only.
TEST_F(DispatcherNcclTest, WithReplicasEachGroupsFirstMemberMakesItsId) {
  v1::Job job = PlannedJob();
  job.mutable_spec()->mutable_parallelism()->set_data_parallel(2);
  *job.mutable_plan() = planner::PlanJob(job.spec()).value().plan;
  ASSERT_EQ(job.plan().workers_size(), 2);
  auto requests = dispatcher_.BuildPrepareRequests(
      job, Targets({{kCuda, "a", 0}, {kCuda, "a", 1}, {kCuda, "b", 0}, {kCuda, "b", 1}}));
  ASSERT_TRUE(requests.ok()) << requests.status();
  // Pipeline groups of replicas 0 and 1 (job ranks 0 and 2 make them), then the stage groups of
  // pipeline ranks 0 and 1 (replica 0's ranks 0 and 1).
  EXPECT_EQ(workers_.nccl_id_calls(),
            (std::vector<std::string>{"127.0.0.1:20000", "127.0.0.1:20002", "127.0.0.1:20000",
                                      "127.0.0.1:20001"}));
  ASSERT_EQ(requests->size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const v1::PrepareRequest& request = (*requests)[r];
    const int q = r / 2, w = r % 2;
    EXPECT_EQ(request.replica(), q);
    EXPECT_EQ(request.rank(), w);
    EXPECT_EQ(request.transport(), v1::TRANSPORT_KIND_NCCL);
    EXPECT_EQ(request.nccl_unique_id(), absl::StrCat("nccl-id-", 1 + q, "-job-000007"));
    EXPECT_EQ(request.nccl_stage_unique_id(), absl::StrCat("nccl-id-", 3 + w, "-job-000007"));
  }
}

TEST_F(DispatcherNcclTest, AFailedStageGroupIdNamesTheGroup) {
  v1::Job job = PlannedJob();
  job.mutable_spec()->mutable_parallelism()->set_data_parallel(2);
  *job.mutable_plan() = planner::PlanJob(job.spec()).value().plan;
  FakeWorkerClient::Behavior no_nccl;
  no_nccl.nccl_id_status = absl::UnavailableError("gone");
  workers_.SetBehavior("127.0.0.1:20001", no_nccl);
  auto requests = dispatcher_.BuildPrepareRequests(
      job, Targets({{kCuda, "a", 0}, {kCuda, "a", 1}, {kCuda, "b", 0}, {kCuda, "b", 1}}));
  EXPECT_EQ(requests.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(requests.status().message()),
              HasSubstr("CreateNcclId failed on rank 1 (worker worker-1 at 127.0.0.1:20001, for "
                        "the stage group of pipeline rank 1): gone"));
}

TEST_F(DispatcherNcclTest, SharedGpuOrCpuRanksUseTcpWithoutAnId) {
  for (const auto& devices : {std::vector<RankDevice>{{kCuda, "a", 0}, {kCuda, "a", 0}},
                              std::vector<RankDevice>{{kCpu, "a", 0}, {kCpu, "a", 0}}}) {
    auto requests = dispatcher_.BuildPrepareRequests(PlannedJob(), Targets(devices));
    ASSERT_TRUE(requests.ok()) << requests.status();
    for (const v1::PrepareRequest& r : *requests) {
      EXPECT_EQ(r.transport(), v1::TRANSPORT_KIND_TCP);
      EXPECT_EQ(r.nccl_unique_id(), "");
    }
  }
  EXPECT_TRUE(workers_.nccl_id_calls().empty());
}

TEST_F(DispatcherNcclTest, AFailedIdRequestFailsTheLaunchNamingRankZero) {
  FakeWorkerClient::Behavior no_nccl;
  no_nccl.nccl_id_status = absl::FailedPreconditionError("built without CUDA and NCCL");
  workers_.SetBehavior("127.0.0.1:20000", no_nccl);
  const absl::Status status = dispatcher_.Launch(
      PlannedJob(), Targets({{kCuda, "a", 0}, {kCuda, "b", 0}}));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("CreateNcclId failed on rank 0 (worker worker-0"));
  EXPECT_TRUE(workers_.prepared().empty());  // nobody prepared a half-made launch
}

// The job manager assigns only workers of the kind a job needs.
TEST_F(JobManagerTest, JobsRunOnlyOnTheirKindOfWorker) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  AddWorker(*registry_, 0, kCpu);
  AddWorker(*registry_, 1, kCpu);
  v1::JobSpec cuda_job = SmallSpec(2, 2);
  cuda_job.mutable_compute()->set_device(kCuda);
  const std::string cuda_id = manager_->Submit(cuda_job).value().id();
  ASSERT_TRUE(WaitState(cuda_id, v1::JOB_STATE_WAITING_FOR_WORKERS));
  // A job that names no kind runs on the CPU workers meanwhile.
  const std::string any_id = manager_->Submit(SmallSpec(2, 2)).value().id();
  ASSERT_TRUE(WaitState(any_id, v1::JOB_STATE_SUCCEEDED));
  EXPECT_EQ(State(cuda_id), v1::JOB_STATE_WAITING_FOR_WORKERS);
  // Two CUDA workers on distinct GPUs: the CUDA job runs there, over NCCL.
  const std::string g0 = AddWorker(*registry_, 2, kCuda, "node-a", 0);
  const std::string g1 = AddWorker(*registry_, 3, kCuda, "node-a", 1);
  ASSERT_TRUE(WaitState(cuda_id, v1::JOB_STATE_SUCCEEDED));
  const v1::Job done = manager_->Get(cuda_id).value();
  EXPECT_THAT(std::vector<std::string>(done.worker_ids().begin(), done.worker_ids().end()),
              ::testing::ElementsAre(g0, g1));
  // The job record says how its tensors moved.
  EXPECT_EQ(done.transport(), v1::TRANSPORT_KIND_NCCL);
  EXPECT_EQ(manager_->Get(any_id).value().transport(), v1::TRANSPORT_KIND_TCP);
  std::set<v1::TransportKind> transports;
  for (const v1::PrepareRequest& r : workers_.prepared()) {
    if (r.job_id() == cuda_id) {
      transports.insert(r.transport());
      EXPECT_FALSE(r.nccl_unique_id().empty());
    }
    if (r.job_id() == any_id) transports.insert(r.transport());
  }
  EXPECT_EQ(transports, (std::set<v1::TransportKind>{v1::TRANSPORT_KIND_NCCL,
                                                     v1::TRANSPORT_KIND_TCP}));
}

TEST_F(JobManagerTest, Bf16JobsRunOnEitherKindAndPlanHalfTheActivationBytes) {
  Make();
  ASSERT_TRUE(manager_->Start().ok());
  v1::JobSpec f32 = SmallSpec(2, 2);
  v1::JobSpec bf16 = f32;
  bf16.mutable_compute()->set_precision(v1::PRECISION_BF16);
  // Named CPU: accepted (CPU workers round GEMM inputs to bf16 and stash in bf16).
  v1::JobSpec on_cpu = bf16;
  on_cpu.mutable_compute()->set_device(kCpu);
  AddWorker(*registry_, 0, kCpu);
  AddWorker(*registry_, 1, kCpu);
  const std::string cpu_id = manager_->Submit(on_cpu).value().id();
  ASSERT_TRUE(WaitState(cpu_id, v1::JOB_STATE_SUCCEEDED));
  // Unnamed: any kind, here the CUDA pair sharing one GPU (TCP).
  AddWorker(*registry_, 2, kCuda, "node-a", 0);
  AddWorker(*registry_, 3, kCuda, "node-a", 0);
  const std::string id = manager_->Submit(bf16).value().id();
  ASSERT_TRUE(WaitState(id, v1::JOB_STATE_SUCCEEDED));
  // The plans: a bf16 stash holds about half the f32 one's bytes on every rank (all but the
  // LayerNorm statistics, 2 of every 66 bytes per token here, halve).
  const std::string f32_id = manager_->Submit(f32).value().id();
  ASSERT_TRUE(WaitState(f32_id, v1::JOB_STATE_SUCCEEDED));
  const auto peaks = [&](const std::string& job) {
    return manager_->Get(job).value().plan().prediction().peak_activation_bytes();
  };
  ASSERT_EQ(peaks(f32_id).size(), 2);
  for (int r = 0; r < 2; ++r) {
    const double ratio = static_cast<double>(peaks(id)[r]) / peaks(f32_id)[r];
    EXPECT_GT(ratio, 0.5) << "rank " << r;
    EXPECT_LT(ratio, 0.53) << "rank " << r;
    EXPECT_EQ(peaks(cpu_id)[r], peaks(id)[r]) << "rank " << r;
  }
}

TEST(WorkerRegistryDevicesTest, AcquireTakesOneKind) {
  WorkerRegistry registry(WorkerRegistryOptions{absl::Seconds(30)});
  AddWorker(registry, 0, kCpu);
  const std::string g = AddWorker(registry, 1, kCuda, "a", 0);
  AddWorker(registry, 2, kCpu);
  EXPECT_EQ(registry.CountByState(kCuda).idle, 1);
  EXPECT_EQ(registry.CountByState(kCpu).idle, 2);
  EXPECT_EQ(registry.CountByState().idle, 3);
  // Two of any kind: not one CPU and one GPU, but the two CPU workers.
  absl::StatusOr<std::vector<WorkerInfo>> two = registry.Acquire(2, "job-1");
  ASSERT_TRUE(two.ok()) << two.status();
  for (const WorkerInfo& w : *two) EXPECT_EQ(w.registration.device, kCpu);
  // Two CUDA workers: there is one.
  EXPECT_THAT(std::string(registry.Acquire(2, "job-2", kCuda).status().message()),
              HasSubstr("of kind DEVICE_KIND_CUDA"));
  absl::StatusOr<std::vector<WorkerInfo>> one = registry.Acquire(1, "job-2", kCuda);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].id, g);
}

}  // namespace
}  // namespace pipetrain::coordinator
