// The real pipetrain-coordinator binary as a process: jobs submitted (no workers, so they wait),
// kill -9, restart on the same --db: every job is still there with its state and reason, ids
// keep counting; a second coordinator on the same --db is refused; SIGTERM exits 0. And its
// metrics flags: --job-metrics-retention-s reaches the daemon.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"
#include "tests/coordinator/grpc_test_util.h"
#include "tests/coordinator/test_util.h"
#include "tests/e2e/http_get.h"
#include "tests/e2e/process_util.h"

namespace pipetrain::coordinator {
namespace {

using ::pipetrain::testing::Process;

struct Daemon {
  Process process;
  std::string address;
  std::string metrics_address;
};

Daemon StartDaemon(const std::string& db, const std::string& log_prefix,
                   std::vector<std::string> extra_args = {}) {
  Daemon d;
  std::vector<std::string> argv = {PIPETRAIN_COORDINATOR_BIN, "--listen", "127.0.0.1:0",
                                   "--metrics-listen", "127.0.0.1:0", "--db", db};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  d.process = testing::Spawn(argv, log_prefix);
  EXPECT_TRUE(testing::WaitForText(d.process.stdout_path, "metrics on", absl::Seconds(30)))
      << testing::ReadFile(d.process.stderr_path);
  const std::string out = testing::ReadFile(d.process.stdout_path);
  const std::string first = out.substr(0, out.find('\n'));
  EXPECT_THAT(first, ::testing::StartsWith("listening on 127.0.0.1:"));
  d.address = first.substr(std::string("listening on ").size());
  const size_t metrics = out.find("metrics on ");
  if (metrics != std::string::npos) {
    const size_t start = metrics + std::string("metrics on ").size();
    d.metrics_address = out.substr(start, out.find('\n', start) - start);
  }
  return d;
}

std::map<std::string, v1::Job> ListAll(v1::JobService::Stub& jobs) {
  std::map<std::string, v1::Job> all;
  std::string token;
  do {
    v1::ListJobsRequest request;
    request.set_page_token(token);
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(jobs.ListJobs(&context, request, &response).ok());
    for (const v1::Job& j : response.jobs()) all[j.id()] = j;
    token = response.next_page_token();
  } while (!token.empty());
  return all;
}

TEST(CoordinatorProcessTest, KillNineAndRestartKeepsEveryJob) {
  const std::string dir = testing::TempDir();
  const std::string db = dir + "/jobs.db";
  Daemon first = StartDaemon(db, dir + "/first");
  auto jobs = v1::JobService::NewStub(testing::Loopback(first.address));

  auto submit = [&](const v1::JobSpec& spec) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(jobs->SubmitJob(&context, request, &response).ok());
    return response.job().id();
  };
  for (int i = 0; i < 5; ++i) submit(testing::SmallSpec(2, 3));
  v1::JobSpec unplannable = testing::SmallSpec(4, 3);
  unplannable.mutable_model()->set_num_layers(2);
  const std::string failed = submit(unplannable);
  const std::string cancelled = submit(testing::SmallSpec(2, 3));
  {
    v1::CancelJobRequest request;
    request.set_job_id(cancelled);
    v1::Job response;
    grpc::ClientContext context;
    ASSERT_TRUE(jobs->CancelJob(&context, request, &response).ok());
  }
  // Wait until planning settled: nothing QUEUED or PLANNING.
  ASSERT_TRUE(testing::WaitUntil([&] {
    for (const auto& [id, job] : ListAll(*jobs)) {
      if (job.state() == v1::JOB_STATE_QUEUED || job.state() == v1::JOB_STATE_PLANNING) {
        return false;
      }
    }
    return true;
  }));
  const std::map<std::string, v1::Job> before = ListAll(*jobs);
  ASSERT_EQ(before.size(), 7u);
  EXPECT_EQ(before.at(failed).state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(before.at(cancelled).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(before.at("job-000001").state(), v1::JOB_STATE_WAITING_FOR_WORKERS);

  testing::Kill(first.process, SIGKILL);
  EXPECT_EQ(testing::WaitFor(first.process, absl::Seconds(10)), 128 + SIGKILL);

  Daemon second = StartDaemon(db, dir + "/second");
  jobs = v1::JobService::NewStub(testing::Loopback(second.address));
  const std::map<std::string, v1::Job> after = ListAll(*jobs);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [id, job] : before) {
    ASSERT_TRUE(after.contains(id)) << id;
    EXPECT_EQ(after.at(id).state(), job.state()) << id;
    EXPECT_EQ(after.at(id).failure_reason(), job.failure_reason()) << id;
    EXPECT_EQ(after.at(id).spec().SerializeAsString(), job.spec().SerializeAsString()) << id;
  }
  EXPECT_THAT(after.at(failed).failure_reason(), ::testing::HasSubstr("model.num_layers"));
  EXPECT_EQ(submit(testing::SmallSpec()), "job-000008");

  // A second coordinator on the same database is refused at start, naming the holder: two
  // would hand the same jobs to different workers.
  Process intruder =
      testing::Spawn({PIPETRAIN_COORDINATOR_BIN, "--listen", "127.0.0.1:0", "--metrics-listen",
                      "", "--db", db},
                     dir + "/intruder");
  EXPECT_EQ(testing::WaitFor(intruder, absl::Seconds(15)), 1);
  EXPECT_THAT(testing::ReadFile(intruder.stderr_path),
              ::testing::HasSubstr(absl::StrCat("is in use by another coordinator (process ",
                                                second.process.pid, ",")));
  EXPECT_EQ(submit(testing::SmallSpec()), "job-000009");  // the first one serves on

  testing::Kill(second.process, SIGTERM);
  EXPECT_EQ(testing::WaitFor(second.process, absl::Seconds(15)), 0)
      << testing::ReadFile(second.process.stderr_path);
}

// --job-metrics-retention-s=0: a job that ended is gone from the next scrape, an unfinished one
// stays; the same scrape has the build and the gRPC server's counts.
TEST(CoordinatorProcessTest, JobMetricsRetentionFlagReachesTheDaemon) {
  const std::string dir = testing::TempDir();
  Daemon d = StartDaemon(dir + "/jobs.db", dir + "/coordinator", {"--job-metrics-retention-s=0"});
  ASSERT_FALSE(d.metrics_address.empty()) << testing::ReadFile(d.process.stdout_path);
  auto jobs = v1::JobService::NewStub(testing::Loopback(d.address));
  auto submit = [&] {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = testing::SmallSpec(2, 3);
    v1::SubmitJobResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(jobs->SubmitJob(&context, request, &response).ok());
    return response.job().id();
  };
  const std::string ended = submit();
  const std::string waiting = submit();  // no workers: both wait
  {
    v1::CancelJobRequest request;
    request.set_job_id(ended);
    v1::Job response;
    grpc::ClientContext context;
    ASSERT_TRUE(jobs->CancelJob(&context, request, &response).ok());
  }
  absl::StatusOr<std::string> body = testing::HttpGet(d.metrics_address, "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->find("\"" + ended + "\""), std::string::npos) << *body;
  EXPECT_NE(body->find("pipetrain_job_state{job_id=\"" + waiting + "\""), std::string::npos)
      << *body;
  EXPECT_NE(body->find("pipetrain_jobs{state=\"cancelled\"} 1\n"), std::string::npos) << *body;
  EXPECT_NE(body->find("pipetrain_build_info{program=\"pipetrain-coordinator\""),
            std::string::npos)
      << *body;
  EXPECT_NE(body->find("pipetrain_grpc_server_handled_total{grpc_code=\"OK\",grpc_method="
                       "\"SubmitJob\",grpc_service=\"pipetrain.v1.JobService\"} 2\n"),
            std::string::npos)
      << *body;
  testing::Kill(d.process, SIGTERM);
  EXPECT_EQ(testing::WaitFor(d.process, absl::Seconds(15)), 0);
}

}  // namespace
}  // namespace pipetrain::coordinator
