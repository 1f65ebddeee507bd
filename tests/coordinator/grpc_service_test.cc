// The coordinator's gRPC edge, in-process on 127.0.0.1:0: more than 30 malformed or out-of-range
// requests across every RPC, each answered with the right status code and a message naming the
// field, while the server keeps serving; a job run through the RPCs with fake workers; bearer
// token; health.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <thread>

#include "coordinator/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"
#include "tests/coordinator/grpc_test_util.h"
#include "tests/coordinator/in_process_coordinator.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::FakeJobStore;
using ::pipetrain::testing::FakeWorkerClient;
using ::pipetrain::testing::HealthStatus;
using ::pipetrain::testing::InProcessConfig;
using ::pipetrain::testing::Loopback;
using ::pipetrain::testing::SmallSpec;
using ::pipetrain::testing::StartWithFakeSteps;
using ::pipetrain::testing::WaitUntil;
using ::testing::HasSubstr;

class GrpcServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    store_ = new FakeJobStore();
    workers_ = new FakeWorkerClient();
    coordinator_ =
        StartWithFakeSteps(InProcessConfig(store_, workers_), workers_, absl::Milliseconds(2))
            .release();
    channel_ = new std::shared_ptr<grpc::Channel>(Loopback(coordinator_->address()));
  }
  static void TearDownTestSuite() {
    workers_->Shutdown();
    delete coordinator_;
    delete channel_;
    delete workers_;
    delete store_;
  }
  std::unique_ptr<v1::JobService::Stub> Jobs() { return v1::JobService::NewStub(*channel_); }
  std::unique_ptr<v1::WorkerRegistry::Stub> Registry() {
    return v1::WorkerRegistry::NewStub(*channel_);
  }

  static FakeJobStore* store_;
  static FakeWorkerClient* workers_;
  static Coordinator* coordinator_;
  static std::shared_ptr<grpc::Channel>* channel_;
};
FakeJobStore* GrpcServiceTest::store_ = nullptr;
FakeWorkerClient* GrpcServiceTest::workers_ = nullptr;
Coordinator* GrpcServiceTest::coordinator_ = nullptr;
std::shared_ptr<grpc::Channel>* GrpcServiceTest::channel_ = nullptr;

struct BadRequest {
  std::string name;
  std::function<grpc::Status(v1::JobService::Stub&, v1::WorkerRegistry::Stub&)> call;
  grpc::StatusCode code;
  std::string field;  // the message must name it
};

grpc::Status Submit(v1::JobService::Stub& jobs, const std::function<void(v1::JobSpec&)>& mutate) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = SmallSpec();
  mutate(*request.mutable_spec());
  v1::SubmitJobResponse response;
  grpc::ClientContext context;
  return jobs.SubmitJob(&context, request, &response);
}

grpc::Status DryRun(v1::JobService::Stub& jobs, const std::function<void(v1::JobSpec&)>& mutate) {
  v1::PlanJobRequest request;
  *request.mutable_spec() = SmallSpec();
  mutate(*request.mutable_spec());
  v1::PlanJobResponse response;
  grpc::ClientContext context;
  return jobs.PlanJob(&context, request, &response);
}

BadRequest SpecCase(std::string name, std::function<void(v1::JobSpec&)> mutate, std::string field) {
  return {
      name,
      [mutate](v1::JobService::Stub& j, v1::WorkerRegistry::Stub&) { return Submit(j, mutate); },
      grpc::StatusCode::INVALID_ARGUMENT, field};
}

std::vector<BadRequest> BadRequests() {
  using J = v1::JobService::Stub;
  using R = v1::WorkerRegistry::Stub;
  const auto I = grpc::StatusCode::INVALID_ARGUMENT;
  const auto N = grpc::StatusCode::NOT_FOUND;
  std::vector<BadRequest> cases = {
      {"submit without spec",
       [](J& j, R&) {
         v1::SubmitJobRequest request;
         v1::SubmitJobResponse response;
         grpc::ClientContext context;
         return j.SubmitJob(&context, request, &response);
       },
       I, "spec"},
      SpecCase(
          "name not UTF-8", [](v1::JobSpec& s) { s.set_name("job \xc3\x28"); },
          "pipetrain.v1.JobSpec.name"),
      SpecCase(
          "nested data path not UTF-8",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_data()->set_path("/data/\xff"); },
          "pipetrain.v1.DataSpec.path"),
      SpecCase(
          "zero layers", [](v1::JobSpec& s) { s.mutable_model()->set_num_layers(0); },
          "model.num_layers"),
      SpecCase(
          "negative layers", [](v1::JobSpec& s) { s.mutable_model()->set_num_layers(-5); },
          "model.num_layers"),
      SpecCase(
          "absurd layers", [](v1::JobSpec& s) { s.mutable_model()->set_num_layers(1 << 30); },
          "model.num_layers"),
      SpecCase(
          "zero hidden", [](v1::JobSpec& s) { s.mutable_model()->set_hidden(0); }, "model.hidden"),
      SpecCase(
          "heads not dividing hidden", [](v1::JobSpec& s) { s.mutable_model()->set_num_heads(3); },
          "model.num_heads"),
      SpecCase(
          "negative seq_len", [](v1::JobSpec& s) { s.mutable_model()->set_seq_len(-1); },
          "model.seq_len"),
      SpecCase(
          "absurd vocab", [](v1::JobSpec& s) { s.mutable_model()->set_vocab_size(1 << 30); },
          "model.vocab_size"),
      SpecCase(
          "zero steps", [](v1::JobSpec& s) { s.mutable_training()->set_steps(0); },
          "training.steps"),
      SpecCase(
          "negative steps", [](v1::JobSpec& s) { s.mutable_training()->set_steps(-3); },
          "training.steps"),
      SpecCase(
          "zero global batch", [](v1::JobSpec& s) { s.mutable_training()->set_global_batch(0); },
          "training.global_batch"),
      SpecCase(
          "zero microbatch", [](v1::JobSpec& s) { s.mutable_training()->set_microbatch_size(0); },
          "training.microbatch_size"),
      SpecCase(
          "batch not a multiple",
          [](v1::JobSpec& s) {
            s.mutable_training()->set_global_batch(5);
            s.mutable_training()->set_microbatch_size(2);
          },
          "training.global_batch"),
      SpecCase(
          "unknown optimizer",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_optimizer()->set_name("sgd"); },
          "training.optimizer.name"),
      SpecCase(
          "NaN learning rate",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_optimizer()->set_learning_rate(NAN); },
          "training.optimizer.learning_rate"),
      SpecCase(
          "negative learning rate",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_optimizer()->set_learning_rate(-1); },
          "training.optimizer.learning_rate"),
      SpecCase(
          "beta1 >= 1",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_optimizer()->set_beta1(1.5); },
          "training.optimizer.beta1"),
      SpecCase(
          "unknown data source",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_data()->set_source("s3"); },
          "training.data.source"),
      SpecCase(
          "text without path",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_data()->set_source("text"); },
          "training.data.path"),
      SpecCase(
          "tokens without path",
          [](v1::JobSpec& s) {
            s.mutable_model()->set_vocab_size(1000);
            s.mutable_training()->mutable_data()->set_source("tokens");
          },
          "training.data.path"),
      SpecCase(
          "tokens without vocab_size",  // the coordinator cannot read it from the files
          [](v1::JobSpec& s) {
            s.mutable_training()->mutable_data()->set_source("tokens");
            s.mutable_training()->mutable_data()->set_path("/data/tokens");
          },
          "model.vocab_size"),
      SpecCase(
          "unknown token dtype",
          [](v1::JobSpec& s) {
            s.mutable_model()->set_vocab_size(1000);
            s.mutable_training()->mutable_data()->set_source("tokens");
            s.mutable_training()->mutable_data()->set_path("/data/tokens");
            s.mutable_training()->mutable_data()->set_token_dtype("int8");
          },
          "training.data.token_dtype"),
      SpecCase(
          "token dtype on the default task",
          [](v1::JobSpec& s) { s.mutable_training()->mutable_data()->set_token_dtype("uint16"); },
          "training.data.token_dtype"),
      SpecCase(
          "zero workers", [](v1::JobSpec& s) { s.mutable_parallelism()->set_num_workers(0); },
          "parallelism.num_workers"),
      SpecCase(
          "absurd workers",
          [](v1::JobSpec& s) { s.mutable_parallelism()->set_num_workers(1000000); },
          "parallelism.num_workers"),
      SpecCase(
          "unknown schedule",
          [](v1::JobSpec& s) { s.mutable_parallelism()->set_schedule("bogus"); },
          "parallelism.schedule"),
      SpecCase(
          "negative chunks",
          [](v1::JobSpec& s) { s.mutable_parallelism()->set_chunks_per_worker(-1); },
          "parallelism.chunks_per_worker"),
      SpecCase(
          "negative budget",
          [](v1::JobSpec& s) { s.mutable_memory()->set_device_budget_bytes(-1); },
          "memory.device_budget_bytes"),
      SpecCase(
          "selective offload without a budget",
          [](v1::JobSpec& s) { s.mutable_memory()->set_offload(v1::OFFLOAD_POLICY_SELECTIVE); },
          "memory.offload"),
      SpecCase(
          "checkpoint without dir",
          [](v1::JobSpec& s) { s.mutable_checkpoint()->set_interval_steps(10); }, "checkpoint.dir"),
      SpecCase(
          "name too long", [](v1::JobSpec& s) { s.set_name(std::string(1000, 'x')); }, "name"),
      {"plan: layers fewer than stages",
       [](J& j, R&) {
         return DryRun(j, [](v1::JobSpec& s) {
           s.mutable_model()->set_num_layers(2);
           s.mutable_parallelism()->set_num_workers(4);
         });
       },
       I, "model.num_layers"},
      {"plan: budget too small",
       [](J& j, R&) {
         return DryRun(j, [](v1::JobSpec& s) { s.mutable_memory()->set_device_budget_bytes(1); });
       },
       I, "memory.device_budget_bytes"},
      {"plan: unknown schedule",
       [](J& j, R&) {
         return DryRun(j, [](v1::JobSpec& s) { s.mutable_parallelism()->set_schedule("zz"); });
       },
       I, "parallelism.schedule"},
      {"plan without spec",
       [](J& j, R&) {
         v1::PlanJobRequest request;
         v1::PlanJobResponse response;
         grpc::ClientContext context;
         return j.PlanJob(&context, request, &response);
       },
       I, "spec"},
  };
  auto get = [](const std::string& id) {
    return [id](J& j, R&) {
      v1::GetJobRequest request;
      request.set_job_id(id);
      v1::Job response;
      grpc::ClientContext context;
      return j.GetJob(&context, request, &response);
    };
  };
  auto cancel = [](const std::string& id) {
    return [id](J& j, R&) {
      v1::CancelJobRequest request;
      request.set_job_id(id);
      v1::Job response;
      grpc::ClientContext context;
      return j.CancelJob(&context, request, &response);
    };
  };
  auto list = [](int state, int page_size, const std::string& token) {
    return [=](J& j, R&) {
      v1::ListJobsRequest request;
      request.set_state(static_cast<v1::JobState>(state));
      request.set_page_size(page_size);
      request.set_page_token(token);
      v1::ListJobsResponse response;
      grpc::ClientContext context;
      return j.ListJobs(&context, request, &response);
    };
  };
  auto reg = [](const std::function<void(v1::RegisterWorkerRequest&)>& mutate) {
    return [mutate](J&, R& r) {
      v1::RegisterWorkerRequest request;
      request.set_address("127.0.0.1:5000");
      request.set_device(v1::DEVICE_KIND_CPU);
      mutate(request);
      v1::RegisterWorkerResponse response;
      grpc::ClientContext context;
      return r.RegisterWorker(&context, request, &response);
    };
  };
  auto heartbeat = [](const std::string& id, int step) {
    return [=](J&, R& r) {
      v1::HeartbeatRequest request;
      request.set_worker_id(id);
      request.set_step(step);
      v1::HeartbeatResponse response;
      grpc::ClientContext context;
      return r.Heartbeat(&context, request, &response);
    };
  };
  auto report = [](const std::string& job) {
    return [=](J&, R& r) {
      v1::ReportStepRequest request;
      request.set_job_id(job);
      v1::ReportStepResponse response;
      grpc::ClientContext context;
      return r.ReportStep(&context, request, &response);
    };
  };
  std::vector<BadRequest> more = {
      {"get unknown job", get("job-424242"), N, "job_id"},
      {"get empty id", get(""), I, "job_id"},
      {"get malformed id", get("../../etc/passwd"), I, "job_id"},
      {"cancel unknown job", cancel("job-424242"), N, "job_id"},
      {"cancel empty id", cancel(""), I, "job_id"},
      {"watch unknown job",
       [](J& j, R&) {
         v1::WatchJobRequest request;
         request.set_job_id("job-424242");
         grpc::ClientContext context;
         auto reader = j.WatchJob(&context, request);
         v1::JobEvent event;
         while (reader->Read(&event)) {
         }
         return reader->Finish();
       },
       N, "job_id"},
      {"list negative page size", list(0, -1, ""), I, "page_size"},
      {"list absurd page size", list(0, 1000000, ""), I, "page_size"},
      {"list bad page token", list(0, 10, "not-a-token"), I, "page_token"},
      {"list unknown state", list(99, 10, ""), I, "state"},
      {"register without address", reg([](auto& r) { r.clear_address(); }), I, "address"},
      {"register bad port", reg([](auto& r) { r.set_address("127.0.0.1:99999"); }), I, "address"},
      {"register without device", reg([](auto& r) { r.clear_device(); }), I, "device"},
      {"register negative memory", reg([](auto& r) { r.set_device_memory_bytes(-1); }), I,
       "device_memory_bytes"},
      {"register bad transport address", reg([](auto& r) { r.set_transport_address("nope"); }), I,
       "transport_address"},
      // Invalid UTF-8 fails protobuf's parse before any handler runs; the answer still names
      // the field (its full protobuf name), not INTERNAL with an empty message.
      {"register address not UTF-8", reg([](auto& r) { r.set_address("\xff\xfe:5000"); }), I,
       "pipetrain.v1.RegisterWorkerRequest.address"},
      {"heartbeat without worker id", heartbeat("", 0), I, "worker_id"},
      {"heartbeat negative step", heartbeat("worker-000001", -1), I, "step"},
      {"report unknown job", report("job-424242"), N, "job_id"},
      {"report without job id", report(""), I, "job_id"},
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}

TEST_F(GrpcServiceTest, MalformedRequestsGetTheRightStatusNamingTheField) {
  auto jobs = Jobs();
  auto registry = Registry();
  const std::vector<BadRequest> cases = BadRequests();
  ASSERT_GE(cases.size(), 30u);
  for (const BadRequest& c : cases) {
    const grpc::Status status = c.call(*jobs, *registry);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.field)) << c.name;
    ASSERT_EQ(HealthStatus(*channel_), 1) << "not serving after " << c.name;
  }
  // Nothing bad was stored.
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(jobs->ListJobs(&context, request, &response).ok());
  EXPECT_EQ(response.jobs_size(), 0);
}

TEST_F(GrpcServiceTest, OversizedMessageIsRejectedAndServerKeepsServing) {
  auto jobs = Jobs();
  v1::SubmitJobRequest request;
  *request.mutable_spec() = SmallSpec();
  request.mutable_spec()->set_name(std::string(17 << 20, 'x'));
  v1::SubmitJobResponse response;
  grpc::ClientContext context;
  const grpc::Status status = jobs->SubmitJob(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("larger than max"));
  EXPECT_EQ(HealthStatus(*channel_), 1);
  EXPECT_EQ(HealthStatus(*channel_, "pipetrain.v1.JobService"), 1);
  EXPECT_EQ(HealthStatus(*channel_, "pipetrain.v1.WorkerRegistry"), 1);
}

TEST_F(GrpcServiceTest, JobRunsThroughTheRpcs) {
  auto jobs = Jobs();
  auto registry = Registry();
  for (int i = 0; i < 2; ++i) {
    v1::RegisterWorkerRequest request;
    request.set_name(absl::StrCat("grpc-w", i));
    request.set_address(absl::StrCat("127.0.0.1:", 21000 + i));
    request.set_transport_address(absl::StrCat("127.0.0.1:", 31000 + i));
    request.set_device(v1::DEVICE_KIND_CPU);
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(registry->RegisterWorker(&context, request, &response).ok());
    EXPECT_THAT(response.worker_id(), HasSubstr("worker-"));
    EXPECT_EQ(response.heartbeat_interval_ms(), 600);  // a fifth of the default 3 s timeout
  }
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = SmallSpec(2, 3);
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(jobs->SubmitJob(&context, submit, &submitted).ok());
  }
  v1::WatchJobRequest watch;
  watch.set_job_id(submitted.job().id());
  grpc::ClientContext context;
  auto reader = jobs->WatchJob(&context, watch);
  v1::JobEvent event;
  // Step events, plus the steps done before the watch began: its first event, the job as it
  // stands, carries their losses (fake steps take 2 ms; a loaded machine can start it late).
  int steps = 0;
  bool first = true;
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  while (reader->Read(&event)) {
    if (first) steps += event.job().losses_size();
    first = false;
    steps += event.has_step() ? 1 : 0;
    last = event.job().state();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(steps, 3);

  v1::GetJobRequest get;
  get.set_job_id(submitted.job().id());
  v1::Job job;
  grpc::ClientContext get_context;
  ASSERT_TRUE(jobs->GetJob(&get_context, get, &job).ok());
  EXPECT_EQ(job.losses_size(), 3);
  EXPECT_GT(job.plan().workers_size(), 0);  // GetJob has the full plan
  // Reports for a finished job are told to stop.
  v1::ReportStepRequest late;
  late.set_job_id(job.id());
  v1::ReportStepResponse late_response;
  grpc::ClientContext late_context;
  ASSERT_TRUE(registry->ReportStep(&late_context, late, &late_response).ok());
  EXPECT_TRUE(late_response.cancel());
  // Cancelling it now is refused.
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  v1::Job cancelled;
  grpc::ClientContext cancel_context;
  EXPECT_EQ(jobs->CancelJob(&cancel_context, cancel, &cancelled).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // An unknown worker is asked to register again.
  v1::HeartbeatRequest hb;
  hb.set_worker_id("worker-999999");
  v1::HeartbeatResponse hb_response;
  grpc::ClientContext hb_context;
  ASSERT_TRUE(registry->Heartbeat(&hb_context, hb, &hb_response).ok());
  EXPECT_TRUE(hb_response.reregister());
}

TEST(GrpcAuthTest, BearerTokenGuardsJobService) {
  FakeJobStore store;
  FakeWorkerClient workers;
  CoordinatorConfig config = InProcessConfig(&store, &workers);
  config.auth_token = "s3cret";
  std::unique_ptr<Coordinator> coordinator = Coordinator::Start(config).value();
  auto channel = Loopback(coordinator->address());
  auto jobs = v1::JobService::NewStub(channel);
  auto call = [&](const std::string& header) {
    v1::ListJobsRequest request;
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    if (!header.empty()) context.AddMetadata("authorization", header);
    return jobs->ListJobs(&context, request, &response);
  };
  grpc::Status missing = call("");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("authorization"));
  EXPECT_EQ(call("Bearer wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("s3cret").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(call("Bearer s3cret").ok());
  EXPECT_TRUE(call("bearer s3cret").ok());  // the scheme is case-insensitive
  EXPECT_TRUE(call("BEARER s3cret").ok());
  // The token itself is compared exactly.
  EXPECT_EQ(call("bearer S3CRET").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Workers do not need the client token.
  auto registry = v1::WorkerRegistry::NewStub(channel);
  v1::HeartbeatRequest hb;
  hb.set_worker_id("worker-000001");
  v1::HeartbeatResponse hb_response;
  grpc::ClientContext context;
  EXPECT_TRUE(registry->Heartbeat(&context, hb, &hb_response).ok());
  coordinator->Shutdown();
  EXPECT_EQ(HealthStatus(channel), -1);  // stopped
}

// SIGTERM's path: health turns NOT_SERVING before the running job's workers are aborted, and
// the job is left RECOVERING in the store for the next coordinator.
TEST(GrpcShutdownTest, NotServingWhileAbortingAndTheJobIsLeftToResume) {
  FakeJobStore store;
  FakeWorkerClient workers;
  std::unique_ptr<Coordinator> coordinator =
      StartWithFakeSteps(InProcessConfig(&store, &workers), &workers, absl::Milliseconds(2));
  FakeWorkerClient::Behavior slow;
  slow.stall_at_step = 1;
  slow.abort_delay = absl::Milliseconds(500);
  workers.SetBehavior("127.0.0.1:20000", slow);
  workers.SetBehavior("127.0.0.1:20001", slow);
  ::pipetrain::testing::AddWorker(coordinator->registry(), 0);
  ::pipetrain::testing::AddWorker(coordinator->registry(), 1);
  const std::string id = coordinator->jobs().Submit(SmallSpec(2, 5)).value().id();
  ASSERT_TRUE(WaitUntil([&] { return workers.start_calls() == 2; }));
  auto channel = Loopback(coordinator->address());
  ASSERT_EQ(HealthStatus(channel), 1);
  std::thread shutdown([&] { coordinator->Shutdown(); });
  EXPECT_TRUE(WaitUntil([&] { return HealthStatus(channel) == 2; }, absl::Seconds(2)))
      << "never NOT_SERVING during the shutdown";
  shutdown.join();
  EXPECT_EQ(workers.abort_calls(id), 2);
  EXPECT_EQ(store.GetJob(id).value().state(), v1::JOB_STATE_RECOVERING);
  workers.Shutdown();
}

}  // namespace
}  // namespace pipetrain::coordinator
