// Deterministic randomized fuzzing of the WorkerRegistry service (what any worker, or anyone who
// can reach the port, sends): random and mutated RegisterWorker, Heartbeat and ReportStep
// requests, with no credential, a wrong one, the cluster secret or a worker's session token,
// against a coordinator with a cluster secret and a running job. The promise: every answer is
// OK or one of the expected codes with a message that starts with the field (or
// "authorization:") it is about; nothing crashes; and calls without a valid credential change
// nothing: the job runs on, the registered workers keep their addresses. Runs for a bounded time
// (PIPETRAIN_FUZZ_SECONDS, default 3).
#include <grpcpp/test/server_context_test_spouse.h>

#include <cstdlib>
#include <random>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/worker_registry_service.h"
#include "gtest/gtest.h"
#include "tests/coordinator/job_manager_fixture.h"

namespace pipetrain::coordinator {
namespace {

constexpr char kSecret[] = "the-cluster-secret";

std::string RandomString(std::mt19937_64& rng) {
  static const char* kPieces[] = {"",           "127.0.0.1:20000", "127.0.0.1:20001", "w0",
                                  "w1",         "worker-000001",   "worker-000002",   "job-000001",
                                  "job-000002", "../../etc/passwd:22", "[::1]:7",    ":",
                                  "\xff\xfe",   "a b:1",           "h:0",             "h:65536"};
  std::string s = kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
  if (rng() % 4 == 0) s += static_cast<char>(rng());
  return s;
}

int64_t RandomInt(std::mt19937_64& rng) {
  static constexpr int64_t kValues[] = {0, 1, 2, 3, -1, 7, 1 << 20, -(1LL << 40), 1LL << 40};
  return kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
}

void Mutate(std::string& bytes, std::mt19937_64& rng) {
  for (int e = 0; e < 1 + static_cast<int>(rng() % 3) && !bytes.empty(); ++e) {
    const size_t at = rng() % bytes.size();
    if (rng() % 2 == 0) {
      bytes[at] = static_cast<char>(rng());
    } else {
      bytes.resize(at);
    }
  }
}

class RegistryFuzzTest : public JobManagerTest {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<WorkerRegistry>(
        WorkerRegistryOptions{.heartbeat_timeout = absl::Seconds(30), .issue_credentials = true},
        &metrics_);
    JobManagerOptions options;
    options.scheduler_tick = absl::Milliseconds(20);
    manager_ = std::make_unique<JobManager>(&store_, registry_.get(), &workers_, &metrics_,
                                            std::move(options));
    ASSERT_TRUE(manager_->Start().ok());
    ::pipetrain::testing::FakeWorkerClient::Behavior stall;
    stall.stall_at_step = 0;  // the job stays RUNNING
    workers_.SetBehavior("127.0.0.1:20000", stall);
    workers_.SetBehavior("127.0.0.1:20001", stall);
    service_ = std::make_unique<WorkerRegistryServiceImpl>(registry_.get(), manager_.get(),
                                                           &metrics_, kSecret);
    for (int i = 0; i < 2; ++i) {
      v1::RegisterWorkerRequest request;
      request.set_name(absl::StrCat("w", i));
      request.set_address(absl::StrCat("127.0.0.1:", 20000 + i));
      request.set_transport_address(absl::StrCat("127.0.0.1:", 30000 + i));
      request.set_device(v1::DEVICE_KIND_CPU);
      v1::RegisterWorkerResponse response;
      ASSERT_TRUE(Call(kSecret, [&](grpc::ServerContext* c) {
                    return service_->RegisterWorker(c, &request, &response);
                  }).ok());
      tokens_.push_back(response.session_token());
    }
    job_ = manager_->Submit(::pipetrain::testing::SmallSpec(2, 3)).value().id();
    ASSERT_TRUE(WaitState(job_, v1::JOB_STATE_RUNNING));
  }

  // Calls `method` with a server context carrying `bearer` ("": no authorization metadata).
  template <typename F>
  grpc::Status Call(const std::string& bearer, F method) {
    grpc::ServerContext context;
    grpc::testing::ServerContextTestSpouse spouse(&context);
    if (!bearer.empty()) spouse.AddClientMetadata("authorization", "Bearer " + bearer);
    return method(&context);
  }

  // The promise for one answer.
  void ExpectContract(const grpc::Status& status, const std::string& what) {
    if (status.ok()) return;
    static const std::regex kField("^[a-z_][a-z0-9_.\\[\\]=]*: [\\s\\S]+");
    switch (status.error_code()) {
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::NOT_FOUND:
      case grpc::StatusCode::FAILED_PRECONDITION:
      case grpc::StatusCode::PERMISSION_DENIED:
      case grpc::StatusCode::UNAUTHENTICATED:
        EXPECT_TRUE(std::regex_match(status.error_message(), kField))
            << what << ": " << status.error_message();
        break;
      default:
        ADD_FAILURE() << what << ": code " << status.error_code() << ": "
                      << status.error_message();
    }
  }

  // One random call; `credentialed` picks among every credential, else none or a wrong one.
  void RandomCall(std::mt19937_64& rng, bool credentialed) {
    std::string bearer = rng() % 2 == 0 ? "" : "not-a-token";
    if (credentialed) {
      const std::string all[] = {"", "wrong", kSecret, tokens_[0], tokens_[1]};
      bearer = all[rng() % 5];
    }
    switch (rng() % 3) {
      case 0: {
        v1::RegisterWorkerRequest request;
        request.set_name(RandomString(rng));
        request.set_address(RandomString(rng));
        request.set_transport_address(RandomString(rng));
        request.set_device(static_cast<v1::DeviceKind>(RandomInt(rng) % 5));
        request.set_cpu_cores(static_cast<int32_t>(RandomInt(rng)));
        request.set_device_memory_bytes(RandomInt(rng));
        std::string bytes = request.SerializeAsString();
        if (rng() % 3 == 0) {
          Mutate(bytes, rng);
          request.Clear();
          (void)request.ParseFromString(bytes);
        }
        v1::RegisterWorkerResponse response;
        ExpectContract(Call(bearer,
                            [&](grpc::ServerContext* c) {
                              return service_->RegisterWorker(c, &request, &response);
                            }),
                       "RegisterWorker " + request.ShortDebugString());
        break;
      }
      case 1: {
        v1::HeartbeatRequest request;
        request.set_worker_id(RandomString(rng));
        request.set_job_id(RandomString(rng));
        request.set_step(static_cast<int32_t>(RandomInt(rng)));
        request.set_leaving(rng() % 2 == 0);
        v1::HeartbeatResponse response;
        ExpectContract(Call(bearer,
                            [&](grpc::ServerContext* c) {
                              return service_->Heartbeat(c, &request, &response);
                            }),
                       "Heartbeat " + request.ShortDebugString());
        break;
      }
      default: {
        v1::ReportStepRequest request;
        request.set_job_id(rng() % 2 == 0 ? job_ : RandomString(rng));
        request.set_rank(static_cast<int32_t>(RandomInt(rng)));
        request.set_attempt(static_cast<int32_t>(RandomInt(rng) % 2));
        if (rng() % 3 == 0) request.set_failure("fuzzed failure");
        if (rng() % 3 == 0) request.set_finished(true);
        if (rng() % 2 == 0) {
          v1::StepReport* report = request.mutable_report();
          report->set_rank(request.rank());
          report->set_step(static_cast<int32_t>(RandomInt(rng)));
          report->set_loss(static_cast<double>(RandomInt(rng)));
          report->set_has_loss(true);
          report->set_step_duration_ns(RandomInt(rng));
        }
        v1::ReportStepResponse response;
        ExpectContract(Call(bearer,
                            [&](grpc::ServerContext* c) {
                              return service_->ReportStep(c, &request, &response);
                            }),
                       "ReportStep " + request.ShortDebugString());
      }
    }
  }

  std::unique_ptr<WorkerRegistryServiceImpl> service_;
  std::vector<std::string> tokens_;
  std::string job_;
};

TEST_F(RegistryFuzzTest, AnswersKeepThePromiseAndUncredentialedCallsChangeNothing) {
  const char* env = std::getenv("PIPETRAIN_FUZZ_SECONDS");
  const absl::Duration budget = absl::Seconds(env != nullptr ? std::atof(env) : 3.0);
  std::mt19937_64 rng(20261126);
  int calls = 0;
  // First half: no credential or a wrong one. Nothing may change.
  for (const absl::Time end = absl::Now() + budget / 2; absl::Now() < end; ++calls) {
    RandomCall(rng, /*credentialed=*/false);
    if (HasFailure()) return;
  }
  EXPECT_EQ(State(job_), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(manager_->Get(job_).value().recoveries().empty());
  const std::vector<WorkerInfo> workers = registry_->List();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].registration.address, "127.0.0.1:20000");
  EXPECT_EQ(workers[1].registration.address, "127.0.0.1:20001");
  EXPECT_EQ(workers[0].state, WorkerState::kBusy);
  // Second half: every credential; answers still keep the promise.
  for (const absl::Time end = absl::Now() + budget / 2; absl::Now() < end; ++calls) {
    RandomCall(rng, /*credentialed=*/true);
    if (HasFailure()) return;
  }
  std::printf("%d calls\n", calls);
  EXPECT_GT(calls, 100);
}

}  // namespace
}  // namespace pipetrain::coordinator
