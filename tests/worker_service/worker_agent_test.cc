// WorkerAgent against a fake coordinator: a shutting-down worker's last heartbeat says it is
// leaving (and no ordinary heartbeat follows it, which would make it idle again); an abort asked
// for in a heartbeat answer applies to the run that was there when the heartbeat was sent, not
// to a job prepared meanwhile; step reports carry the Prepare's attempt.
#include "worker/service/worker_agent.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"

namespace pipetrain::worker {
namespace {

class FakeCoordinator : public CoordinatorClient {
 public:
  using HeartbeatFn = std::function<v1::HeartbeatResponse(const v1::HeartbeatRequest&)>;
  // Answers each heartbeat (called outside the lock); empty: an empty answer.
  void SetOnHeartbeat(HeartbeatFn fn) {
    absl::MutexLock lock(&mu_);
    on_heartbeat_ = std::move(fn);
  }

  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest&) override {
    v1::RegisterWorkerResponse response;
    response.set_worker_id("worker-000001");
    response.set_heartbeat_interval_ms(10);
    return response;
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override {
    HeartbeatFn fn;
    {
      absl::MutexLock lock(&mu_);
      heartbeats_.push_back(request);
      fn = on_heartbeat_;
    }
    return fn ? fn(request) : v1::HeartbeatResponse{};
  }
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& r) override {
    absl::MutexLock lock(&mu_);
    reports_.push_back(r);
    return v1::ReportStepResponse{};
  }
  std::vector<v1::HeartbeatRequest> heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  std::vector<v1::ReportStepRequest> reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }

 private:
  absl::Mutex mu_;
  HeartbeatFn on_heartbeat_;
  std::vector<v1::HeartbeatRequest> heartbeats_;
  std::vector<v1::ReportStepRequest> reports_;
};

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return done();
}

struct Agent {
  explicit Agent(FakeCoordinator* coordinator) {
    auto listener = TcpListener::Bind("127.0.0.1", 0).value();
    WorkerAgentOptions options;
    options.name = "test-worker";
    options.heartbeat_interval = absl::Milliseconds(10);
    options.transport_address = absl::StrCat("127.0.0.1:", listener->port());
    transport_address = options.transport_address;
    agent = std::make_unique<WorkerAgent>(options, coordinator, std::move(listener), nullptr);
    agent->Start("127.0.0.1:1");
  }
  std::string transport_address;
  std::unique_ptr<WorkerAgent> agent;
};

// A one-rank job of a small model: Prepare needs no peers.
v1::PrepareRequest OneRankJob(const std::string& transport_address, int attempt) {
  v1::JobSpec spec;
  spec.mutable_model()->set_num_layers(2);
  spec.mutable_model()->set_hidden(16);
  spec.mutable_model()->set_num_heads(2);
  spec.mutable_training()->set_steps(3);
  spec.mutable_training()->set_global_batch(2);
  spec.mutable_training()->set_microbatch_size(1);
  spec.mutable_training()->mutable_optimizer()->set_learning_rate(1e-3);
  spec.mutable_parallelism()->set_num_workers(1);
  spec.mutable_parallelism()->set_schedule("1f1b");
  v1::PrepareRequest request;
  request.set_job_id("job-000001");
  request.set_rank(0);
  *request.mutable_spec() = spec;
  *request.mutable_plan() = planner::PlanJob(spec).value().plan;
  v1::Peer* peer = request.add_peers();
  peer->set_rank(0);
  peer->set_address(transport_address);
  request.set_attempt(attempt);
  return request;
}

TEST(WorkerAgentTest, ShutdownEndsWithOneLeavingHeartbeat) {
  FakeCoordinator coordinator;
  Agent a(&coordinator);
  ASSERT_TRUE(WaitUntil([&] { return coordinator.heartbeats().size() >= 3; }));
  a.agent->Shutdown();
  const std::vector<v1::HeartbeatRequest> beats = coordinator.heartbeats();
  ASSERT_FALSE(beats.empty());
  EXPECT_TRUE(beats.back().leaving());
  EXPECT_EQ(beats.back().worker_id(), "worker-000001");
  for (size_t i = 0; i + 1 < beats.size(); ++i) EXPECT_FALSE(beats[i].leaving()) << i;
  // Every heartbeat names the worker, so a restarted coordinator can tell a stale id apart.
  for (const v1::HeartbeatRequest& b : beats) EXPECT_EQ(b.name(), "test-worker");
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(coordinator.heartbeats().size(), beats.size());  // nothing after it
  EXPECT_EQ(a.agent->Prepare(OneRankJob(a.transport_address, 0)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(WorkerAgentTest, StaleHeartbeatAbortDoesNotAbortANewPrepare) {
  FakeCoordinator coordinator;
  absl::Notification prepared;
  std::atomic<bool> stale_answered{false};
  std::atomic<int> seen{0};
  // The first heartbeat that carries no job is answered only after the Prepare below, with an
  // abort of that job (as a coordinator that had not yet assigned it would).
  coordinator.SetOnHeartbeat([&](const v1::HeartbeatRequest& r) {
    v1::HeartbeatResponse response;
    if (r.job_id().empty() && seen.fetch_add(1) == 2) {
      prepared.WaitForNotificationWithTimeout(absl::Seconds(10));
      response.add_abort_job_ids("job-000001");
      stale_answered = true;
    }
    return response;
  });
  Agent a(&coordinator);
  ASSERT_TRUE(WaitUntil([&] { return seen >= 3; }));
  ASSERT_TRUE(a.agent->Prepare(OneRankJob(a.transport_address, 4)).ok());
  prepared.Notify();
  ASSERT_TRUE(WaitUntil([&] { return stale_answered.load(); }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(a.agent->busy()) << "a stale heartbeat answer aborted the new job";

  // The run reports its steps with the Prepare's attempt.
  v1::StartRequest start;
  start.set_job_id("job-000001");
  start.set_num_steps(3);
  ASSERT_TRUE(a.agent->StartRun(start).ok());
  ASSERT_TRUE(WaitUntil([&] { return !a.agent->busy(); }));
  const std::vector<v1::ReportStepRequest> reports = coordinator.reports();
  ASSERT_EQ(reports.size(), 4u);  // 3 steps and `finished`
  for (const v1::ReportStepRequest& r : reports) EXPECT_EQ(r.attempt(), 4);
  EXPECT_TRUE(reports.back().finished());

  // An abort answered to a heartbeat sent while the job is there does apply.
  coordinator.SetOnHeartbeat(nullptr);
  ASSERT_TRUE(a.agent->Prepare(OneRankJob(a.transport_address, 5)).ok());
  coordinator.SetOnHeartbeat([](const v1::HeartbeatRequest& r) {
    v1::HeartbeatResponse response;
    if (!r.job_id().empty()) response.add_abort_job_ids(r.job_id());
    return response;
  });
  EXPECT_TRUE(WaitUntil([&] { return !a.agent->busy(); }));
  a.agent->Shutdown();
}

// Training data is read by the workers only: the coordinator plans a job whose text file it
// cannot see, and the worker that cannot read it fails Prepare naming the field and the file.
TEST(WorkerAgentTest, UnreadableDataPathFailsPrepareNamingTheField) {
  FakeCoordinator coordinator;
  Agent a(&coordinator);
  v1::PrepareRequest request = OneRankJob(a.transport_address, 0);
  v1::DataSpec* data = request.mutable_spec()->mutable_training()->mutable_data();
  data->set_source("text");
  data->set_path("/nonexistent/corpus.txt");
  request.mutable_spec()->mutable_model()->set_seq_len(8);
  ASSERT_TRUE(planner::PlanJob(request.spec()).ok());  // planning never opens the file
  *request.mutable_plan() = planner::PlanJob(request.spec()).value().plan;
  const absl::Status status = a.agent->Prepare(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("training.data.path"), std::string::npos) << status;
  EXPECT_NE(status.message().find("/nonexistent/corpus.txt"), std::string::npos) << status;
  EXPECT_FALSE(a.agent->busy());
  a.agent->Shutdown();
}

// The same for the "tokens" source: planned from the spec alone (model.vocab_size declares the
// vocabulary), refused at Prepare naming the field and the directory's train.bin.
TEST(WorkerAgentTest, MissingTokenDataFailsPrepareNamingTheField) {
  FakeCoordinator coordinator;
  Agent a(&coordinator);
  v1::PrepareRequest request = OneRankJob(a.transport_address, 0);
  const std::string dir = ::testing::TempDir() + "/pipetrain_no_tokens";
  std::filesystem::create_directories(dir);  // a directory without train.bin
  v1::DataSpec* data = request.mutable_spec()->mutable_training()->mutable_data();
  data->set_source("tokens");
  data->set_path(dir);
  request.mutable_spec()->mutable_model()->set_vocab_size(300);
  request.mutable_spec()->mutable_model()->set_seq_len(8);
  auto planned = planner::PlanJob(request.spec());  // planning never opens the files
  ASSERT_TRUE(planned.ok()) << planned.status();
  *request.mutable_plan() = planned->plan;
  const absl::Status status = a.agent->Prepare(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("training.data.path: " + dir + "/train.bin: no such file"),
            std::string::npos)
      << status;
  EXPECT_FALSE(a.agent->busy());
  a.agent->Shutdown();
}

}  // namespace
}  // namespace pipetrain::worker
