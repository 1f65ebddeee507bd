// Security defaults as real processes: a coordinator and CPU workers with mutual TLS and a
// bearer token on the client API. A throwaway CA and certificates (SAN IP:127.0.0.1) are made
// with the `openssl` CLI at test time. Checked: a 1F1B job runs to SUCCEEDED through
// `pipetrain submit --watch` with --tls-ca/--tls-cert/--tls-key/--token, and its losses equal
// the reference trainer's; a client without the CA (or without a client certificate) gets
// UNAVAILABLE and exit code 1; a wrong or missing token gets UNAUTHENTICATED and exit code 1; a
// worker without a trusted client certificate cannot register (the job keeps waiting, and the
// coordinator counts no workers) until trusted workers come. The client also takes the token
// from PIPETRAIN_TOKEN or --token-file and the address from PIPETRAIN_COORDINATOR.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/job_client.h"
#include "google/protobuf/util/json_util.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"
#include "pipetrain/v1/worker.grpc.pb.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/http_get.h"
#include "tests/e2e/process_util.h"
#include "tests/e2e/shell.h"

namespace pipetrain {
namespace {

using testing::Shell;

constexpr char kToken[] = "s3cret-token";
constexpr int kWorkers = 2;
constexpr int kSteps = 3;

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A CA named `ca` in `dir` (ca.pem, ca.key).
void MakeCa(const std::string& dir, const std::string& ca) {
  std::string out;
  ASSERT_EQ(Shell(absl::StrCat("cd ", dir,
                               " && openssl req -x509 -newkey ec -pkeyopt "
                               "ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=",
                               ca, " -keyout ", ca, ".key -out ", ca,
                               ".pem -addext basicConstraints=critical,CA:TRUE -addext "
                               "keyUsage=critical,keyCertSign,cRLSign"),
                  &out),
            0)
      << out;
}

// A leaf certificate `name`.pem / `name`.key signed by CA `ca`, valid for 127.0.0.1 as a
// server and as a client.
void MakeLeaf(const std::string& dir, const std::string& ca, const std::string& name) {
  WriteFile(absl::StrCat(dir, "/", name, ".ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth,clientAuth\n");
  std::string out;
  ASSERT_EQ(Shell(absl::StrCat("cd ", dir,
                               " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                               "-nodes -subj /CN=",
                               name, " -keyout ", name, ".key -out ", name,
                               ".csr && openssl x509 -req -days 2 -in ", name, ".csr -CA ", ca,
                               ".pem -CAkey ", ca, ".key -CAcreateserial -extfile ", name,
                               ".ext -out ", name, ".pem"),
                  &out),
            0)
      << out;
}

class TlsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir();
    MakeCa(dir_, "ca");
    MakeCa(dir_, "rogue-ca");
    for (const char* name : {"coordinator", "worker", "client"}) MakeLeaf(dir_, "ca", name);
    MakeLeaf(dir_, "rogue-ca", "rogue");
    if (HasFatalFailure()) return;

    coordinator_ =
        testing::Spawn({PIPETRAIN_COORDINATOR_BIN, "--listen", "127.0.0.1:0", "--metrics-listen",
                        "127.0.0.1:0", "--db", dir_ + "/pipetrain.db", "--heartbeat-timeout-s", "5",
                        "--auth-token", kToken, "--tls-cert", Pem("coordinator"), "--tls-key",
                        Key("coordinator"), "--tls-client-ca", Pem("ca")},
                       dir_ + "/coordinator");
    ASSERT_TRUE(testing::WaitForText(coordinator_.stdout_path, "metrics on ", absl::Seconds(30)))
        << testing::ReadFile(coordinator_.stderr_path);
    for (absl::string_view line :
         absl::StrSplit(testing::ReadFile(coordinator_.stdout_path), '\n')) {
      if (absl::ConsumePrefix(&line, "listening on ")) address_ = std::string(line);
      if (absl::ConsumePrefix(&line, "metrics on ")) metrics_ = std::string(line);
    }
    ASSERT_FALSE(address_.empty());

    const v1::JobSpec spec = testing::SmallJob("1f1b", kWorkers, 4, kSteps);
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(spec, &json).ok());
    WriteFile(dir_ + "/job.json", json);
  }

  void TearDown() override {
    for (const testing::Process& w : workers_) testing::Kill(w, SIGTERM);
    for (const testing::Process& w : workers_) testing::WaitFor(w, absl::Seconds(10));
    if (coordinator_.pid > 0) {
      testing::Kill(coordinator_, SIGTERM);
      testing::WaitFor(coordinator_, absl::Seconds(10));
    }
  }

  std::string Pem(const std::string& name) const { return absl::StrCat(dir_, "/", name, ".pem"); }
  std::string Key(const std::string& name) const { return absl::StrCat(dir_, "/", name, ".key"); }

  // Abort (of a job nobody runs) on a worker's gRPC service with `creds`: how far a caller
  // with those credentials gets.
  grpc::StatusCode AbortOnWorker(const std::string& address,
                                 std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = v1::Worker::NewStub(grpc::CreateChannel(address, std::move(creds)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::AbortRequest request;
    request.set_job_id("job-none");
    v1::AbortResponse response;
    return stub->Abort(&context, request, &response).error_code();
  }

  // A worker daemon presenting `cert` (from ca.pem or rogue-ca.pem) and trusting ca.pem.
  void StartWorker(const std::string& cert) {
    const int index = static_cast<int>(workers_.size());
    workers_.push_back(
        testing::Spawn({PIPETRAIN_WORKER_BIN, "--coordinator", address_, "--name",
                        absl::StrCat("tls-worker-", index), "--metrics-listen", "", "--tls-cert",
                        Pem(cert), "--tls-key", Key(cert), "--tls-ca", Pem("ca")},
                       absl::StrCat(dir_, "/worker-", index)));
    ASSERT_TRUE(
        testing::WaitForText(workers_.back().stdout_path, "listening on ", absl::Seconds(30)))
        << testing::ReadFile(workers_.back().stderr_path);
  }

  // `pipetrain <args> --coordinator <address>` plus the TLS and token flags in `auth`.
  int Pipetrain(const std::string& args, const std::string& auth, std::string* output) {
    return Shell(
        absl::StrCat(PIPETRAIN_CLIENT_BIN, " ", args, " --coordinator ", address_, " ", auth),
        output);
  }
  std::string GoodAuth() const {
    return absl::StrCat("--tls-ca ", Pem("ca"), " --tls-cert ", Pem("client"), " --tls-key ",
                        Key("client"), " --token ", kToken);
  }
  client::ClientTls GoodTls() const { return {Pem("ca"), Pem("client"), Key("client")}; }

  // Registered workers the coordinator counts (idle + busy), from its /metrics.
  int RegisteredWorkers() const {
    auto body = testing::HttpGet(metrics_, "/metrics");
    if (!body.ok()) return -1;
    double total = 0;
    for (absl::string_view line : absl::StrSplit(*body, '\n')) {
      for (const char* state : {"idle", "busy"}) {
        absl::string_view rest = line;
        if (absl::ConsumePrefix(&rest, absl::StrCat("pipetrain_workers{state=\"", state, "\"} "))) {
          double v = 0;
          if (absl::SimpleAtod(rest, &v)) total += v;
        }
      }
    }
    return static_cast<int>(total);
  }

  std::string dir_;
  std::string address_;
  std::string metrics_;
  testing::Process coordinator_;
  std::vector<testing::Process> workers_;
};

TEST_F(TlsClusterTest, JobSucceedsOverMutualTlsWithToken) {
  for (int r = 0; r < kWorkers; ++r) StartWorker("worker");
  std::string out;
  ASSERT_EQ(Pipetrain(absl::StrCat("submit ", dir_, "/job.json --watch"), GoodAuth(), &out), 0)
      << out << "\ncoordinator log:\n"
      << testing::ReadFile(coordinator_.stderr_path);
  EXPECT_TRUE(absl::StrContains(out, "SUCCEEDED")) << out;
  std::string job_id;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::ConsumePrefix(&line, "submitted ")) job_id = std::string(line);
  }
  ASSERT_FALSE(job_id.empty()) << out;

  // The same job through the library client over mutual TLS: the reference losses.
  client::JobClient jobs(address_, kToken, GoodTls());
  auto job = jobs.Get(job_id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  const std::vector<double> reference =
      testing::ReferenceLosses(testing::SmallJob("1f1b", kWorkers, 4, kSteps));
  ASSERT_EQ(job->losses_size(), kSteps);
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(job->losses(s), reference[s]) << "step " << s;

  // The workers' own gRPC server requires mutual TLS too.
  std::string worker_address;
  for (absl::string_view line : absl::StrSplit(testing::ReadFile(workers_[0].stdout_path), '\n')) {
    if (absl::ConsumePrefix(&line, "listening on ")) worker_address = std::string(line);
  }
  ASSERT_FALSE(worker_address.empty());
  grpc::SslCredentialsOptions ca_only;
  ca_only.pem_root_certs = testing::ReadFile(Pem("ca"));
  grpc::SslCredentialsOptions mutual = ca_only;
  mutual.pem_cert_chain = testing::ReadFile(Pem("coordinator"));
  mutual.pem_private_key = testing::ReadFile(Key("coordinator"));
  grpc::SslCredentialsOptions rogue = ca_only;
  rogue.pem_cert_chain = testing::ReadFile(Pem("rogue"));
  rogue.pem_private_key = testing::ReadFile(Key("rogue"));
  EXPECT_EQ(AbortOnWorker(worker_address, grpc::InsecureChannelCredentials()),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(AbortOnWorker(worker_address, grpc::SslCredentials(ca_only)),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(AbortOnWorker(worker_address, grpc::SslCredentials(rogue)),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(AbortOnWorker(worker_address, grpc::SslCredentials(mutual)),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsClusterTest, ClientWithoutCaOrClientCertIsUnavailable) {
  std::string out;
  // Plaintext against a TLS server.
  EXPECT_EQ(Pipetrain("list", absl::StrCat("--token ", kToken), &out), 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "cannot reach the coordinator")) << out;
  // TLS with a client certificate, but without the CA: the server's certificate is untrusted.
  EXPECT_EQ(Pipetrain("list",
                      absl::StrCat("--tls-cert ", Pem("client"), " --tls-key ", Key("client"),
                                   " --token ", kToken),
                      &out),
            1)
      << out;
  EXPECT_TRUE(absl::StrContains(out, "cannot reach the coordinator")) << out;

  client::JobClient plaintext(address_, kToken, {}, absl::Seconds(5));
  EXPECT_EQ(plaintext.List(v1::JOB_STATE_UNSPECIFIED).status().code(),
            absl::StatusCode::kUnavailable);
  client::JobClient no_ca(address_, kToken, {"", Pem("client"), Key("client")}, absl::Seconds(5));
  EXPECT_EQ(no_ca.List(v1::JOB_STATE_UNSPECIFIED).status().code(), absl::StatusCode::kUnavailable);
  // The CA but no client certificate: mutual TLS refuses the handshake.
  client::JobClient no_cert(address_, kToken, {Pem("ca"), "", ""}, absl::Seconds(5));
  EXPECT_EQ(no_cert.List(v1::JOB_STATE_UNSPECIFIED).status().code(),
            absl::StatusCode::kUnavailable);
  // A client certificate from another CA: refused too.
  client::JobClient rogue(address_, kToken, {Pem("ca"), Pem("rogue"), Key("rogue")},
                          absl::Seconds(5));
  EXPECT_EQ(rogue.List(v1::JOB_STATE_UNSPECIFIED).status().code(), absl::StatusCode::kUnavailable);
  // An unreadable CA file is bad input naming the flag (exit code 2).
  EXPECT_EQ(Pipetrain("list", absl::StrCat("--tls-ca ", dir_, "/missing.pem"), &out), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--tls-ca")) << out;

  // The good client still gets through (the refusals were about the credentials).
  EXPECT_EQ(Pipetrain("list", GoodAuth(), &out), 0) << out;
}

TEST_F(TlsClusterTest, WrongOrMissingTokenIsUnauthenticated) {
  const std::string tls = absl::StrCat("--tls-ca ", Pem("ca"), " --tls-cert ", Pem("client"),
                                       " --tls-key ", Key("client"));
  std::string out;
  EXPECT_EQ(Pipetrain(absl::StrCat("submit ", dir_, "/job.json"),
                      absl::StrCat(tls, " --token not-the-token"), &out),
            1)
      << out;
  EXPECT_TRUE(absl::StrContains(out, "pipetrain submit:")) << out;
  EXPECT_EQ(Pipetrain("list", tls, &out), 1) << out;

  client::JobClient wrong(address_, "not-the-token", GoodTls());
  EXPECT_EQ(wrong.List(v1::JOB_STATE_UNSPECIFIED).status().code(),
            absl::StatusCode::kUnauthenticated);
  client::JobClient missing(address_, "", GoodTls());
  EXPECT_EQ(missing.Submit(testing::SmallJob("1f1b", kWorkers, 4, kSteps)).status().code(),
            absl::StatusCode::kUnauthenticated);
  // The token from the environment or a file instead of the command line; the coordinator's
  // address from the environment.
  EXPECT_EQ(Shell(absl::StrCat("PIPETRAIN_COORDINATOR=", address_, " PIPETRAIN_TOKEN=", kToken,
                               " ", PIPETRAIN_CLIENT_BIN, " list ", tls),
                  &out),
            0)
      << out;
  WriteFile(dir_ + "/token", absl::StrCat(kToken, "\n"));
  EXPECT_EQ(Pipetrain("list", absl::StrCat(tls, " --token-file ", dir_, "/token"), &out), 0)
      << out;
  WriteFile(dir_ + "/wrong-token", "not-the-token\n");
  EXPECT_EQ(Pipetrain("list", absl::StrCat(tls, " --token-file ", dir_, "/wrong-token"), &out), 1)
      << out;
  EXPECT_EQ(Pipetrain("list", absl::StrCat(tls, " --token-file ", dir_, "/missing"), &out), 2)
      << out;
  EXPECT_TRUE(absl::StrContains(out, "--token-file: cannot read")) << out;
  // Nothing was submitted by the refused calls.
  client::JobClient good(address_, kToken, GoodTls());
  auto listed = good.List(v1::JOB_STATE_UNSPECIFIED);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
}

TEST_F(TlsClusterTest, WorkerWithoutTrustedClientCertCannotRegister) {
  // A raw WorkerRegistry call that trusts the CA but presents no client certificate.
  {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = testing::ReadFile(Pem("ca"));
    auto stub =
        v1::WorkerRegistry::NewStub(grpc::CreateChannel(address_, grpc::SslCredentials(ssl)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::RegisterWorkerRequest request;
    request.set_address("127.0.0.1:1");
    request.set_transport_address("127.0.0.1:2");
    request.set_name("no-cert");
    v1::RegisterWorkerResponse response;
    const grpc::Status status = stub->RegisterWorker(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  }
  // A worker cannot even be started without a certificate of its own in a TLS cluster.
  testing::Process bare = testing::Spawn({PIPETRAIN_WORKER_BIN, "--coordinator", address_,
                                          "--metrics-listen", "", "--tls-ca", Pem("ca")},
                                         dir_ + "/bare-worker");
  EXPECT_EQ(testing::WaitFor(bare, absl::Seconds(10)), 1);
  EXPECT_TRUE(absl::StrContains(testing::ReadFile(bare.stderr_path), "--tls-ca: needs --tls-cert"))
      << testing::ReadFile(bare.stderr_path);

  // Two real workers whose certificates come from another CA keep trying and never register.
  StartWorker("rogue");
  StartWorker("rogue");
  std::string out;
  ASSERT_EQ(Pipetrain(absl::StrCat("submit ", dir_, "/job.json"), GoodAuth(), &out), 0) << out;
  std::string job_id;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::ConsumePrefix(&line, "submitted ")) job_id = std::string(line);
  }
  ASSERT_FALSE(job_id.empty()) << out;
  absl::SleepFor(absl::Seconds(3));  // several registration attempts (100 ms backoff, doubling)
  ASSERT_EQ(Pipetrain("status " + job_id, GoodAuth(), &out), 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "WAITING_FOR_WORKERS")) << out;
  EXPECT_EQ(RegisteredWorkers(), 0);
  for (const testing::Process& w : workers_) {
    EXPECT_EQ(testing::WaitFor(w, absl::Milliseconds(1)), std::nullopt) << "rogue worker exited";
  }
  workers_.clear();  // WaitFor killed them

  // Control: trusted workers register and the waiting job runs to the end.
  StartWorker("worker");
  StartWorker("worker");
  ASSERT_EQ(Pipetrain("watch " + job_id + " --no-progress", GoodAuth(), &out), 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "SUCCEEDED")) << out;
  EXPECT_EQ(RegisteredWorkers(), kWorkers);
}

}  // namespace
}  // namespace pipetrain
