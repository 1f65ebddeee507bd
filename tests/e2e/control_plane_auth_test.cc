// The control plane with a cluster secret, as real processes on loopback (no TLS): a coordinator
// started with --cluster-secret-file and two workers given the same file train a 1F1B job to
// the reference trainer's losses (registration with the secret, heartbeats and step reports
// with the session token, Worker calls with the coordinator token, transport hellos tagged with
// the launch's secret). Checked against an outsider who can reach every port: registering
// without the secret, or with a wrong one, is UNAUTHENTICATED (a worker with the wrong secret
// never counts as registered); a "leaving" heartbeat or a failure report without the session
// token is refused and changes nothing; Prepare and Abort on a worker's Worker service without
// the coordinator's token are UNAUTHENTICATED; one that does not parse is INVALID_ARGUMENT naming
// the field.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/job_client.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"
#include "pipetrain/v1/worker.grpc.pb.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/process_util.h"

namespace pipetrain {
namespace {

constexpr int kWorkers = 2;
constexpr int kSteps = 20;  // long enough to be spoofed while it runs

// The first value announced after `prefix` in a process's stdout ("listening on ...").
std::string Announced(const testing::Process& p, absl::string_view prefix) {
  for (absl::string_view line : absl::StrSplit(testing::ReadFile(p.stdout_path), '\n')) {
    if (absl::ConsumePrefix(&line, prefix)) return std::string(line);
  }
  return "";
}

class ControlPlaneAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir();
    secret_file_ = dir_ + "/cluster-secret";
    std::ofstream(secret_file_) << "the-cluster-secret\n";
    ::chmod(secret_file_.c_str(), 0600);
    std::ofstream(dir_ + "/wrong-secret") << "not-the-secret\n";
    coordinator_ = testing::Spawn(
        {PIPETRAIN_COORDINATOR_BIN, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--db",
         dir_ + "/jobs.db", "--cluster-secret-file", secret_file_},
        dir_ + "/coordinator");
    ASSERT_TRUE(testing::WaitForText(coordinator_.stdout_path, "listening on", absl::Seconds(30)))
        << testing::ReadFile(coordinator_.stderr_path);
    address_ = Announced(coordinator_, "listening on ");
    registry_ = v1::WorkerRegistry::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    for (const testing::Process& w : workers_) testing::Kill(w, SIGTERM);
    for (const testing::Process& w : workers_) testing::WaitFor(w, absl::Seconds(10));
    testing::Kill(coordinator_, SIGTERM);
    testing::WaitFor(coordinator_, absl::Seconds(10));
  }

  testing::Process StartWorker(const std::string& name, const std::string& secret_file) {
    testing::Process p = testing::Spawn(
        {PIPETRAIN_WORKER_BIN, "--coordinator", address_, "--name", name, "--metrics-listen", "",
         "--cluster-secret-file", secret_file},
        absl::StrCat(dir_, "/", name));
    workers_.push_back(p);
    EXPECT_TRUE(testing::WaitForText(p.stdout_path, "listening on ", absl::Seconds(30)))
        << testing::ReadFile(p.stderr_path);
    return p;
  }

  // A WorkerRegistry call as an outsider would make it, with `bearer` ("" : none).
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::WorkerRegistry::Stub::*method)(grpc::ClientContext*,
                                                                     const Request&, Response*),
                    const Request& request, const std::string& bearer) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    if (!bearer.empty()) context.AddMetadata("authorization", "Bearer " + bearer);
    Response response;
    return ((*registry_).*method)(&context, request, &response);
  }

  std::string dir_, secret_file_, address_;
  testing::Process coordinator_;
  std::vector<testing::Process> workers_;
  std::unique_ptr<v1::WorkerRegistry::Stub> registry_;
};

TEST_F(ControlPlaneAuthTest, OnlyHoldersOfTheSecretTakePartAndTheJobRunsExactly) {
  // Registration needs the secret.
  v1::RegisterWorkerRequest registration;
  registration.set_address("127.0.0.1:9");
  registration.set_name("outsider");
  registration.set_device(v1::DEVICE_KIND_CPU);
  EXPECT_EQ(Call(&v1::WorkerRegistry::Stub::RegisterWorker, registration, "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(&v1::WorkerRegistry::Stub::RegisterWorker, registration, "not-the-secret")
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // A worker with the wrong secret says why and is never given work.
  const testing::Process wrong = StartWorker("wrong", dir_ + "/wrong-secret");
  EXPECT_TRUE(testing::WaitForText(wrong.stderr_path, "registering needs the cluster secret",
                                   absl::Seconds(20)))
      << testing::ReadFile(wrong.stderr_path);
  for (int r = 0; r < kWorkers; ++r) StartWorker(absl::StrCat("member-", r), secret_file_);

  client::JobClient jobs(address_, "", client::ClientTls{}, absl::Seconds(5));
  const v1::JobSpec spec = testing::SmallJob("1f1b", kWorkers, 4, kSteps);
  auto submitted = jobs.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<v1::Job> job = jobs.Get(submitted->id());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  // Spoof only once both members are registered and hold the job (a heartbeat for an id the
  // coordinator does not know yet is answered "register", which says nothing).
  while (absl::Now() < deadline && job.ok() && job->state() != v1::JOB_STATE_RUNNING &&
         job->state() != v1::JOB_STATE_SUCCEEDED && job->state() != v1::JOB_STATE_FAILED) {
    absl::SleepFor(absl::Milliseconds(5));
    job = jobs.Get(submitted->id());
  }
  int spoof_rounds = 0;
  while (absl::Now() < deadline && job.ok() && job->state() != v1::JOB_STATE_SUCCEEDED &&
         job->state() != v1::JOB_STATE_FAILED) {
    ++spoof_rounds;
    // Spoofs while it runs: a "leaving" heartbeat and a failure report for each member, without
    // the member's session token.
    // (The members are worker-000001 and -000002: the refused registrations took no id.)
    for (const char* id : {"worker-000001", "worker-000002"}) {
      v1::HeartbeatRequest leaving;
      leaving.set_worker_id(id);
      leaving.set_leaving(true);
      EXPECT_EQ(Call(&v1::WorkerRegistry::Stub::Heartbeat, leaving, "").error_code(),
                grpc::StatusCode::UNAUTHENTICATED)
          << id;
    }
    for (int rank = 0; rank < kWorkers; ++rank) {
      v1::ReportStepRequest failure;
      failure.set_job_id(submitted->id());
      failure.set_rank(rank);
      failure.set_failure("spoofed");
      EXPECT_EQ(Call(&v1::WorkerRegistry::Stub::ReportStep, failure, "").error_code(),
                grpc::StatusCode::UNAUTHENTICATED);
    }
    absl::SleepFor(absl::Milliseconds(20));
    job = jobs.Get(submitted->id());
  }
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_GT(spoof_rounds, 0) << "the job ended before it could be spoofed";
  ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED)
      << job->failure_reason() << "\n" << testing::ReadFile(coordinator_.stderr_path);
  EXPECT_EQ(job->restarts(), 0);
  EXPECT_TRUE(job->recoveries().empty());
  const std::vector<double> losses(job->losses().begin(), job->losses().end());
  EXPECT_EQ(losses, testing::ReferenceLosses(spec));  // bitwise
  EXPECT_EQ(std::vector<std::string>(job->worker_ids().begin(), job->worker_ids().end()),
            (std::vector<std::string>{"worker-000001", "worker-000002"}));

  // The Worker service takes Prepare and Abort only with the coordinator's token.
  const std::string worker_address = Announced(workers_.back(), "listening on ");
  auto worker = v1::Worker::NewStub(
      grpc::CreateChannel(worker_address, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::AbortRequest abort;
    abort.set_job_id(submitted->id());
    v1::AbortResponse response;
    EXPECT_EQ(worker->Abort(&context, abort, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer the-cluster-secret");  // not the right token
    v1::PrepareRequest prepare;
    prepare.set_job_id("job-rogue");
    v1::PrepareResponse response;
    EXPECT_EQ(worker->Prepare(&context, prepare, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // A request that does not parse (invalid UTF-8 in a string field) is refused before the
    // credential check, naming the field.
    grpc::ClientContext context;
    v1::PrepareRequest prepare;
    prepare.set_job_id("job-\xff");
    v1::PrepareResponse response;
    const grpc::Status status = worker->Prepare(&context, prepare, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "pipetrain.v1.PrepareRequest.job_id"))
        << status.error_message();
  }
}

}  // namespace
}  // namespace pipetrain
