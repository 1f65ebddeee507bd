// WorkerMetrics (worker/service/worker_metrics.h): a worker's series carry the job and rank it
// runs, the step time is also a histogram, and a job's series go a retention after its run ends.
#include "worker/service/worker_metrics.h"

#include <prometheus/text_serializer.h>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/manual_clock.h"

namespace pipetrain::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Scrape(const WorkerMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.collectable()->Collect());
}

StepResult Step(int step, int64_t duration_ns, int64_t peak) {
  StepResult r;
  r.step = step;
  r.duration_ns = duration_ns;
  r.peak_activation_bytes = peak;
  r.device_peak_bytes = 10 * peak;
  r.sent_bytes = 100;
  r.received_bytes = 40;
  r.offloaded_bytes = 7;
  return r;
}

TEST(WorkerMetricsTest, SeriesCarryTheJobAndRankAndGoAfterTheRetention) {
  ManualClock clock;
  WorkerMetrics metrics(JobSeriesOptions{absl::Minutes(10), &clock});
  metrics.SetBusy(true);
  metrics.StepDone("job-000007", 2, 1, Step(0, 500'000'000, 4096));
  StepResult last = Step(1, 1'500'000'000, 2048);
  last.loss = 0.25;
  metrics.StepDone("job-000007", 2, 1, last);
  std::string body = Scrape(metrics);
  const std::string job = "{job_id=\"job-000007\",rank=\"2\",replica=\"1\"} ";
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_steps_total" + job + "2\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_step_duration_seconds" + job + "1.5\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_step_seconds_count" + job + "2\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_step_seconds_sum" + job + "2\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_step_seconds_bucket{job_id=\"job-000007\","
                              "rank=\"2\",replica=\"1\",le=\"0.512\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_step_seconds_bucket{job_id=\"job-000007\","
                              "rank=\"2\",replica=\"1\",le=\"1.024\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_step_seconds_bucket{job_id=\"job-000007\","
                              "rank=\"2\",replica=\"1\",le=\"2.048\"} 2\n"));
  // The last step's peaks, not the max.
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_peak_activation_bytes" + job + "2048\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_device_peak_bytes" + job + "20480\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_loss" + job + "0.25\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_transfer_bytes_total{direction=\"sent\","
                              "job_id=\"job-000007\",rank=\"2\",replica=\"1\"} 200\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_transfer_bytes_total{direction=\"received\","
                              "job_id=\"job-000007\",rank=\"2\",replica=\"1\"} 80\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_offload_bytes_total" + job + "14\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_busy 1\n"));

  // The next job on this worker, as rank 0: its own series, beside the old job's until those
  // expire.
  metrics.RunEnded("job-000007");
  metrics.StepDone("job-000008", 0, 0, Step(0, 1'000'000, 1));
  clock.Advance(absl::ToInt64Nanoseconds(absl::Minutes(10)) - 1);
  body = Scrape(metrics);
  EXPECT_THAT(body, HasSubstr("pipetrain_worker_steps_total" + job + "2\n"));
  EXPECT_THAT(
      body,
      HasSubstr("pipetrain_worker_steps_total{job_id=\"job-000008\",rank=\"0\",replica=\"0\"} 1"));
  clock.Advance(1);
  body = Scrape(metrics);
  EXPECT_THAT(body, Not(HasSubstr("job-000007")));
  EXPECT_THAT(
      body,
      HasSubstr("pipetrain_worker_steps_total{job_id=\"job-000008\",rank=\"0\",replica=\"0\"} 1"));
  // A worker exports no job-level name of the coordinator's.
  EXPECT_THAT(body, Not(HasSubstr("pipetrain_job_")));
}

}  // namespace
}  // namespace pipetrain::worker
