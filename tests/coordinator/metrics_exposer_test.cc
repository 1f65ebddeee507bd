// The coordinator's Prometheus endpoint (needs pipetrain_thread_stack_fix: common/thread_stack_fix.cc): an
// in-process coordinator with the Exposer on 127.0.0.1:0 runs a job on fake workers; GET
// /metrics has the pipetrain_ series with the right values. One Exposer per test binary.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "coordinator/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/in_process_coordinator.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"

namespace pipetrain::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Plain HTTP/1.0 GET of http://127.0.0.1:port/path; the whole response.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(MetricsExposerTest, ScrapeHasPipetrainSeries) {
  testing::FakeJobStore store;
  testing::FakeWorkerClient workers;
  CoordinatorConfig config = testing::InProcessConfig(&store, &workers);
  config.metrics_listen = "127.0.0.1:0";
  std::unique_ptr<Coordinator> coordinator =
      testing::StartWithFakeSteps(config, &workers, absl::ZeroDuration());
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      coordinator->metrics_address().substr(coordinator->metrics_address().rfind(':') + 1), &port));
  ASSERT_GT(port, 0);

  testing::AddWorker(coordinator->registry(), 0);
  testing::AddWorker(coordinator->registry(), 1);
  const std::string id = coordinator->jobs().Submit(testing::SmallSpec(2, 3)).value().id();
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return coordinator->jobs().Get(id).value().state() == v1::JOB_STATE_SUCCEEDED; }));
  coordinator->registry().Heartbeat("worker-000001", "");

  const std::string body = HttpGet(port, "/metrics");
  EXPECT_THAT(body, HasSubstr("200 OK"));
  EXPECT_THAT(body, HasSubstr("pipetrain_jobs{state=\"succeeded\"} 1"));
  EXPECT_THAT(body, HasSubstr("pipetrain_jobs{state=\"queued\"} 0"));
  EXPECT_THAT(body, HasSubstr("pipetrain_jobs_submitted_total 1"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_steps_total{job_id=\"job-000001\"} 3"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_duration_seconds{job_id=\"job-000001\"} 0.002"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_predicted_step_seconds{job_id=\"job-000001\"}"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_loss{job_id=\"job-000001\"} 0.666"));
  // The fake's rank 0 reports norm 1 + step / 4 and clips nothing.
  EXPECT_THAT(body, HasSubstr("pipetrain_job_grad_norm{job_id=\"job-000001\"} 1.5"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_clipped_steps_total{job_id=\"job-000001\"} 0"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_tokens_per_second{job_id=\"job-000001\"} 16000"));
  EXPECT_THAT(
      body, HasSubstr("pipetrain_job_bubble_ratio{job_id=\"job-000001\",kind=\"measured\"} 0.75"));
  EXPECT_THAT(body,
              HasSubstr("pipetrain_job_bubble_ratio{job_id=\"job-000001\",kind=\"predicted\"}"));
  // The step bubble: both fake ranks' 0.5 ms of compute against 2 ranks x the 2 ms step.
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"measured\"} 0.75"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"predicted\"}"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_peak_activation_bytes{job_id=\"job-000001\",kind="
                              "\"measured\",rank=\"1\"} 2002"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_peak_activation_bytes{job_id=\"job-000001\",kind="
                              "\"predicted\",rank=\"0\"}"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_device_peak_bytes{job_id=\"job-000001\","
                              "rank=\"1\"} 200002"));
  // The coordinator exports no pipetrain_worker_ series of a job: those are the workers'.
  EXPECT_THAT(body, Not(HasSubstr("pipetrain_worker_peak_activation_bytes")));
  EXPECT_THAT(body, Not(HasSubstr("pipetrain_worker_device_peak_bytes")));
  // Both fake ranks: 0.5 ms of compute in the 2 ms step.
  EXPECT_THAT(body, HasSubstr("pipetrain_job_rank_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"measured\",rank=\"0\"} 0.75"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_rank_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"predicted\",rank=\"1\"}"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_count{job_id=\"job-000001\"} 3"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_bucket{job_id=\"job-000001\",le="
                              "\"0.002\"} 3"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"succeeded\"} 1"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"running\"} 0"));
  EXPECT_THAT(body, HasSubstr("pipetrain_build_info{program=\"pipetrain-coordinator\""));
  EXPECT_THAT(body, HasSubstr("pipetrain_workers{state=\"idle\"} 2"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_heartbeats_total 1"));
  workers.Shutdown();
  coordinator->Shutdown();
}

}  // namespace
}  // namespace pipetrain::coordinator
