// WorkerAgent against a fake coordinator: a shutting-down worker's last heartbeat says it is
// leaving (and no ordinary heartbeat follows it, which would make it idle again); an abort asked
// for in a heartbeat answer applies to the run that was there when the heartbeat was sent, not
// to a job prepared meanwhile; step reports carry the Prepare's attempt; a worker that reports
// its run finished is already free for the next job; Prepare checks memory and paths; Worker
// calls need the coordinator's token once one is issued, and fuzzed calls keep the promise.
#include "worker/service/worker_agent.h"

#include <grpcpp/test/server_context_test_spouse.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "tests/fakes/manual_clock.h"
#include "worker/service/worker_metrics.h"
#include "worker/service/worker_service.h"

namespace pipetrain::worker {
namespace {

class FakeCoordinator : public CoordinatorClient {
 public:
  using HeartbeatFn = std::function<v1::HeartbeatResponse(const v1::HeartbeatRequest&)>;
  using ReportFn = std::function<void(const v1::ReportStepRequest&)>;
  // Answers each heartbeat (called outside the lock); empty: an empty answer.
  void SetOnHeartbeat(HeartbeatFn fn) {
    absl::MutexLock lock(&mu_);
    on_heartbeat_ = std::move(fn);
  }
  // Sees each step report after it is recorded (called outside the lock).
  void SetOnReport(ReportFn fn) {
    absl::MutexLock lock(&mu_);
    on_report_ = std::move(fn);
  }

  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest&) override {
    v1::RegisterWorkerResponse response;
    response.set_worker_id("worker-000001");
    response.set_heartbeat_interval_ms(10);
    absl::MutexLock lock(&mu_);
    response.set_coordinator_token(coordinator_token_);
    return response;
  }
  // What registrations issue as the coordinator token (empty: none, no cluster secret).
  void SetCoordinatorToken(std::string token) {
    absl::MutexLock lock(&mu_);
    coordinator_token_ = std::move(token);
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
    ReportFn fn;
    {
      absl::MutexLock lock(&mu_);
      reports_.push_back(r);
      fn = on_report_;
    }
    if (fn) fn(r);
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
  ReportFn on_report_;
  std::string coordinator_token_;
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
  // `available_memory`: what the session sees as this worker's available host memory (0: none
  // given, not checked).
  explicit Agent(FakeCoordinator* coordinator, int64_t available_memory = 0,
                 AllowedPaths allowed_paths = {}, WorkerMetrics* metrics = nullptr) {
    auto listener = TcpListener::Bind("127.0.0.1", 0).value();
    WorkerAgentOptions options;
    options.name = "test-worker";
    options.heartbeat_interval = absl::Milliseconds(10);
    options.transport_address = absl::StrCat("127.0.0.1:", listener->port());
    options.session.allowed_paths = std::move(allowed_paths);
    if (available_memory > 0) {
      options.session.available_host_memory_bytes = [available_memory] { return available_memory; };
    }
    transport_address = options.transport_address;
    agent = std::make_unique<WorkerAgent>(options, coordinator, std::move(listener), metrics);
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
  // The worker frees itself, then reports the run finished.
  ASSERT_TRUE(WaitUntil([&] {
    return !coordinator.reports().empty() && coordinator.reports().back().finished();
  }));
  EXPECT_FALSE(a.agent->busy());
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

// The agent feeds its metrics the job and rank of every step, and ends the job's series' life
// when the run ends: they stay for the retention, then go.
TEST(WorkerAgentTest, MetricsCarryTheJobAndRankAndExpireAfterTheRun) {
  FakeCoordinator coordinator;
  ManualClock clock;
  WorkerMetrics metrics(JobSeriesOptions{absl::Minutes(1), &clock});
  Agent a(&coordinator, 0, {}, &metrics);
  ASSERT_TRUE(a.agent->Prepare(OneRankJob(a.transport_address, 0)).ok());
  v1::StartRequest start;
  start.set_job_id("job-000001");
  start.set_num_steps(3);
  ASSERT_TRUE(a.agent->StartRun(start).ok());
  ASSERT_TRUE(WaitUntil([&] {
    return !coordinator.reports().empty() && coordinator.reports().back().finished();
  }));
  auto scrape = [&] {
    return prometheus::TextSerializer().Serialize(metrics.collectable()->Collect());
  };
  std::string body = scrape();
  EXPECT_NE(body.find("pipetrain_worker_steps_total{job_id=\"job-000001\",rank=\"0\","
                      "replica=\"0\"} 3\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("pipetrain_worker_step_seconds_count{job_id=\"job-000001\",rank=\"0\","
                      "replica=\"0\"} 3"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("pipetrain_worker_busy 0\n"), std::string::npos) << body;
  clock.Advance(absl::ToInt64Nanoseconds(absl::Minutes(1)));
  body = scrape();
  EXPECT_EQ(body.find("job-000001"), std::string::npos) << body;
  a.agent->Shutdown();
}

// The coordinator hands a worker its next job the moment every rank has said "finished"; by then
// the worker must be free. It used to clear its job only after that report, so the next Prepare
// could be refused as "busy with job ..." (seen 4 times in 3 runs of 200 one-step jobs).
TEST(WorkerAgentTest, WorkerIsFreeWhenItReportsFinished) {
  FakeCoordinator coordinator;
  Agent a(&coordinator);
  absl::Notification finished;
  absl::Status next_prepare = absl::UnknownError("not tried");
  coordinator.SetOnReport([&](const v1::ReportStepRequest& r) {
    if (!r.finished() || r.job_id() != "job-000001") return;
    v1::PrepareRequest next = OneRankJob(a.transport_address, 0);
    next.set_job_id("job-000002");
    next_prepare = a.agent->Prepare(next).status();
    finished.Notify();
  });
  ASSERT_TRUE(a.agent->Prepare(OneRankJob(a.transport_address, 0)).ok());
  v1::StartRequest start;
  start.set_job_id("job-000001");
  start.set_num_steps(2);
  ASSERT_TRUE(a.agent->StartRun(start).ok());
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(next_prepare.ok()) << next_prepare;
  EXPECT_TRUE(a.agent->busy());  // with job-000002

  start.set_job_id("job-000002");
  ASSERT_TRUE(a.agent->StartRun(start).ok());
  auto finished_reports = [&] {
    int n = 0;
    for (const v1::ReportStepRequest& r : coordinator.reports()) n += r.finished();
    return n;
  };
  ASSERT_TRUE(WaitUntil([&] { return finished_reports() == 2; }, absl::Seconds(30)));
  EXPECT_FALSE(a.agent->busy());
  a.agent->Shutdown();
}

// A model whose parameter state does not fit the worker's memory is refused at Prepare with the
// numbers, before any of it is allocated (a vocabulary of 4M x hidden 65536 used to be accepted
// and allocated).
TEST(WorkerAgentTest, ModelLargerThanMemoryFailsPrepareWithTheNumbers) {
  FakeCoordinator coordinator;
  Agent small(&coordinator, /*available_memory=*/64 << 10);
  const absl::Status status = small.agent->Prepare(OneRankJob(small.transport_address, 0)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("model: rank 0's stages need "), std::string::npos) << status;
  EXPECT_NE(status.message().find(" for parameters, gradients and AdamW moments, "),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("over the 65536 bytes of this worker's available host memory"),
            std::string::npos)
      << status;
  EXPECT_FALSE(small.agent->busy());
  small.agent->Shutdown();

  Agent roomy(&coordinator, /*available_memory=*/int64_t{1} << 30);
  EXPECT_TRUE(roomy.agent->Prepare(OneRankJob(roomy.transport_address, 0)).ok());
  roomy.agent->Shutdown();
}

// A job may name only paths under the worker's roots: /etc/shadow as training data (a worker
// used to read it) or a checkpoint directory outside --checkpoint-root is refused at Prepare,
// naming the field and the flag, before anything is opened.
TEST(WorkerAgentTest, PathsOutsideTheWorkersRootsFailPrepare) {
  FakeCoordinator coordinator;
  const std::string root = ::testing::TempDir() + "/pipetrain_roots";
  std::filesystem::create_directories(root);
  Agent a(&coordinator, 0, AllowedPaths{.data_root = root, .checkpoint_root = root});
  v1::PrepareRequest request = OneRankJob(a.transport_address, 0);
  v1::DataSpec* data = request.mutable_spec()->mutable_training()->mutable_data();
  data->set_source("text");
  data->set_path(root + "/../../../etc/shadow");
  absl::Status status = a.agent->Prepare(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_NE(status.message().find("training.data.path: "), std::string::npos) << status;
  EXPECT_NE(status.message().find("(resolved: /etc/shadow) is outside this worker's --data-root"),
            std::string::npos)
      << status;

  request = OneRankJob(a.transport_address, 0);
  request.mutable_spec()->mutable_checkpoint()->set_dir("/tmp/elsewhere");
  request.mutable_spec()->mutable_checkpoint()->set_interval_steps(1);
  status = a.agent->Prepare(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_NE(status.message().find("checkpoint.dir: /tmp/elsewhere"), std::string::npos) << status;
  EXPECT_NE(status.message().find("--checkpoint-root"), std::string::npos) << status;
  EXPECT_FALSE(a.agent->busy());

  // Weights to start from are read like data: under --data-root only.
  v1::PrepareRequest init = OneRankJob(a.transport_address, 0);
  init.mutable_spec()->mutable_model()->set_init_from("/etc/model.safetensors");
  status = a.agent->Prepare(init).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_NE(status.message().find("model.init_from: /etc/model.safetensors"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("--data-root"), std::string::npos) << status;
  EXPECT_FALSE(a.agent->busy());

  request.mutable_spec()->mutable_checkpoint()->set_dir(root + "/ckpt");  // inside: fine
  EXPECT_TRUE(a.agent->Prepare(request).ok());
  a.agent->Shutdown();
}

// A worker checks every field of what it is asked to run itself, as the coordinator does at
// submit (a plan file or a caller that is not the coordinator skips that check): a NaN learning
// rate, a negative microbatch size, an unknown precision or a negative start step is refused at
// Prepare with InvalidArgument naming the field, and the worker stays free.
TEST(WorkerAgentTest, PrepareValidatesEveryFieldItself) {
  FakeCoordinator coordinator;
  Agent a(&coordinator, 0);
  struct Bad {
    std::function<void(v1::PrepareRequest*)> spoil;
    std::string field;
  };
  const std::vector<Bad> cases = {
      {[](v1::PrepareRequest* r) {
         r->mutable_spec()->mutable_training()->mutable_optimizer()->set_learning_rate(
             std::numeric_limits<double>::quiet_NaN());
       },
       "training.optimizer.learning_rate: "},
      {[](v1::PrepareRequest* r) { r->mutable_spec()->mutable_training()->set_microbatch_size(-4); },
       "training.microbatch_size: "},
      {[](v1::PrepareRequest* r) {
         r->mutable_spec()->mutable_compute()->set_precision(static_cast<v1::Precision>(7));
       },
       "compute.precision: "},
      {[](v1::PrepareRequest* r) { r->set_start_step(-1); }, "start_step: "},
      {[](v1::PrepareRequest* r) { r->set_start_step(4); }, "start_step: "},
  };
  for (const Bad& bad : cases) {
    v1::PrepareRequest request = OneRankJob(a.transport_address, 0);
    bad.spoil(&request);
    const absl::Status status = a.agent->Prepare(request).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.field << status;
    EXPECT_EQ(status.message().substr(0, bad.field.size()), bad.field) << status;
    EXPECT_FALSE(a.agent->busy());
  }
  EXPECT_TRUE(a.agent->Prepare(OneRankJob(a.transport_address, 0)).ok());
  a.agent->Shutdown();
}

// Worker calls (Prepare, Start, Abort, CreateNcclId) are the coordinator's only: once a
// registration issued a coordinator token, a call must carry it; without one issued (no
// cluster secret) nothing is checked.
TEST(WorkerAgentTest, WorkerCallsNeedTheCoordinatorTokenOnceOneIsIssued) {
  FakeCoordinator open;
  Agent plain(&open);
  ASSERT_TRUE(WaitUntil([&] { return !plain.agent->worker_id().empty(); }));
  EXPECT_TRUE(plain.agent->AuthorizeCoordinator(std::nullopt).ok());
  plain.agent->Shutdown();

  FakeCoordinator issuing;
  issuing.SetCoordinatorToken("coordinator-token-1");
  Agent a(&issuing);
  ASSERT_TRUE(WaitUntil([&] { return !a.agent->worker_id().empty(); }));
  EXPECT_EQ(a.agent->AuthorizeCoordinator(std::nullopt).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.agent->AuthorizeCoordinator("coordinator-token-2").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(a.agent->AuthorizeCoordinator("coordinator-token-1").ok());
  a.agent->Shutdown();
}

// Deterministic randomized fuzzing of the Worker service (what the coordinator, or anyone who
// can reach the port, sends): mutated and random Prepare, Start, Abort and CreateNcclId requests
// with no credential, a wrong one or the coordinator's token. The promise: every answer is OK
// or an expected code with a message; nothing crashes or hangs; and calls without the token
// change nothing (the worker stays free). PIPETRAIN_FUZZ_SECONDS bounds it (default 3).
TEST(WorkerAgentTest, FuzzedWorkerCallsKeepThePromise) {
  const char* env = std::getenv("PIPETRAIN_FUZZ_SECONDS");
  const absl::Duration budget = absl::Seconds(env != nullptr ? std::atof(env) : 3.0);
  FakeCoordinator coordinator;
  coordinator.SetCoordinatorToken("the-coordinator-token");
  Agent a(&coordinator);
  ASSERT_TRUE(WaitUntil([&] { return !a.agent->worker_id().empty(); }));
  WorkerServiceImpl service(a.agent.get());
  const std::string valid = OneRankJob(a.transport_address, 0).SerializeAsString();
  std::mt19937_64 rng(20261126);
  auto call = [&](const std::string& bearer, auto method) {
    grpc::ServerContext context;
    grpc::testing::ServerContextTestSpouse spouse(&context);
    if (!bearer.empty()) spouse.AddClientMetadata("authorization", "Bearer " + bearer);
    const absl::Time start = absl::Now();
    const grpc::Status status = method(&context);
    EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "a call took too long";
    return status;
  };
  auto expect_contract = [](const grpc::Status& status, const std::string& what) {
    if (status.ok()) return;
    switch (status.error_code()) {
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::FAILED_PRECONDITION:
      case grpc::StatusCode::UNAUTHENTICATED:
      case grpc::StatusCode::PERMISSION_DENIED:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
      case grpc::StatusCode::NOT_FOUND:
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        EXPECT_FALSE(status.error_message().empty()) << what;
        break;
      default:
        ADD_FAILURE() << what << ": code " << status.error_code() << ": "
                      << status.error_message();
    }
  };
  auto random_call = [&](bool credentialed) {
    const std::string bearers[] = {"", "wrong", "the-coordinator-token"};
    const std::string bearer = bearers[rng() % (credentialed ? 3 : 2)];
    switch (rng() % 4) {
      case 0: {
        std::string bytes = valid;
        for (int e = 0; e < 1 + static_cast<int>(rng() % 3); ++e) {
          bytes[rng() % bytes.size()] = static_cast<char>(rng());
        }
        v1::PrepareRequest request;
        if (!request.ParseFromString(bytes)) return;
        if (rng() % 4 == 0) request.set_start_step(-static_cast<int>(rng() % 3));
        v1::PrepareResponse response;
        expect_contract(call(bearer,
                             [&](grpc::ServerContext* c) {
                               return service.Prepare(c, &request, &response);
                             }),
                        "Prepare");
        break;
      }
      case 1: {
        v1::StartRequest request;
        request.set_job_id(rng() % 2 == 0 ? "job-000001" : "job-x");
        request.set_num_steps(static_cast<int>(rng() % 4) - 1);
        v1::StartResponse response;
        expect_contract(call(bearer,
                             [&](grpc::ServerContext* c) {
                               return service.Start(c, &request, &response);
                             }),
                        "Start " + request.ShortDebugString());
        break;
      }
      case 2: {
        v1::AbortRequest request;
        request.set_job_id(rng() % 2 == 0 ? "job-000001" : "");
        v1::AbortResponse response;
        expect_contract(call(bearer,
                             [&](grpc::ServerContext* c) {
                               return service.Abort(c, &request, &response);
                             }),
                        "Abort");
        break;
      }
      default: {
        v1::CreateNcclIdRequest request;
        request.set_job_id("job-000001");
        v1::CreateNcclIdResponse response;
        expect_contract(call(bearer,
                             [&](grpc::ServerContext* c) {
                               return service.CreateNcclId(c, &request, &response);
                             }),
                        "CreateNcclId");
      }
    }
  };
  int calls = 0;
  for (const absl::Time end = absl::Now() + budget / 2; absl::Now() < end; ++calls) {
    random_call(/*credentialed=*/false);
    ASSERT_FALSE(a.agent->busy()) << "an unauthenticated call gave the worker a job";
    if (HasFailure()) break;
  }
  for (const absl::Time end = absl::Now() + budget / 2; absl::Now() < end && !HasFailure();
       ++calls) {
    random_call(/*credentialed=*/true);
  }
  std::printf("%d calls\n", calls);
  EXPECT_GT(calls, 20);
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
