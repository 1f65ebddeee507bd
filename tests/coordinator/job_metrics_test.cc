// The coordinator's per-job series (coordinator/metrics.h): one name per meaning, the job's
// state, the step-time histogram, the per-rank bubble, and their removal a retention after the
// job ends; then the same through a running Coordinator whose retention comes from its config.
#include <prometheus/text_serializer.h>

#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/in_process_coordinator.h"
#include "tests/coordinator/test_util.h"
#include "tests/fakes/fake_job_store.h"
#include "tests/fakes/fake_worker_client.h"
#include "tests/fakes/manual_clock.h"

namespace pipetrain::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int64_t kMinuteNs = 60'000'000'000;

std::string Scrape(const CoordinatorMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.collectable()->Collect());
}

TEST(JobMetricsTest, AJobsSeriesFromSubmitToRemoval) {
  ManualClock clock;
  CoordinatorMetrics metrics(JobSeriesOptions{absl::Minutes(10), &clock});
  const std::string id = "job-000001";
  metrics.JobStateChanged(id, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED);
  metrics.JobStateChanged(id, v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLANNING);
  metrics.JobStateChanged(id, v1::JOB_STATE_PLANNING, v1::JOB_STATE_WAITING_FOR_WORKERS);
  // Step 4 s predicted; rank 0 computes 3 s of it, rank 1 2 s: idle 1/4 and 1/2 of the step.
  v1::Prediction prediction;
  prediction.set_makespan_s(4);
  prediction.add_busy_s(3);
  prediction.add_busy_s(2);
  prediction.add_peak_activation_bytes(100);
  prediction.add_peak_activation_bytes(200);
  metrics.JobPlanned(id, prediction);
  metrics.JobStateChanged(id, v1::JOB_STATE_WAITING_FOR_WORKERS, v1::JOB_STATE_RUNNING);

  v1::Job job;
  job.set_id(id);
  for (int step = 0; step < 3; ++step) {
    job.set_steps_done(step + 1);
    job.set_last_step_s(step == 2 ? 3.0 : 1.5);  // two in (1.024, 2.048], one in (2.048, 4.096]
    job.clear_measured_peak_activation_bytes();
    job.add_measured_peak_activation_bytes(100);
    job.add_measured_peak_activation_bytes(250);
    metrics.JobStep(job, {0.5, 0.625});
  }
  std::string body = Scrape(metrics);
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"running\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"queued\"} 0\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"waiting_for_"
                              "workers\"} 0\n"));
  // The plan's and the job's peaks under the job's name; nothing under the workers' name.
  EXPECT_THAT(body, HasSubstr("pipetrain_job_peak_activation_bytes{job_id=\"job-000001\",kind="
                              "\"predicted\",rank=\"1\"} 200\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_peak_activation_bytes{job_id=\"job-000001\",kind="
                              "\"measured\",rank=\"1\"} 250\n"));
  EXPECT_THAT(body, Not(HasSubstr("pipetrain_worker_peak_activation_bytes")));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_rank_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"predicted\",rank=\"0\"} 0.25\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_rank_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"predicted\",rank=\"1\"} 0.5\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_rank_bubble_ratio{job_id=\"job-000001\",kind="
                              "\"measured\",rank=\"1\"} 0.625\n"));
  // The histogram has every step; the gauge the last.
  EXPECT_THAT(body, HasSubstr("# TYPE pipetrain_job_step_seconds histogram"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_count{job_id=\"job-000001\"} 3\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_sum{job_id=\"job-000001\"} 6\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_bucket{job_id=\"job-000001\",le="
                              "\"1.024\"} 0\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_bucket{job_id=\"job-000001\",le="
                              "\"2.048\"} 2\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_seconds_bucket{job_id=\"job-000001\",le="
                              "\"4.096\"} 3\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_step_duration_seconds{job_id=\"job-000001\"} 3\n"));

  // A job that had ended before the coordinator started: counted by state, no series of its own.
  metrics.JobStateChanged("job-000002", v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_FAILED);
  EXPECT_THAT(Scrape(metrics), Not(HasSubstr("job-000002")));
  EXPECT_THAT(metrics.JobsWithSeries(), ElementsAre(id));

  // The job ends: its series stay 10 minutes, with the end state, then go.
  clock.Advance(kMinuteNs);
  metrics.JobStateChanged(id, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED);
  clock.Advance(10 * kMinuteNs - 1);
  body = Scrape(metrics);
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"running\"} 0\n"));
  EXPECT_THAT(body,
              HasSubstr("pipetrain_job_state{job_id=\"job-000001\",state=\"succeeded\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_steps_total{job_id=\"job-000001\"} 3\n"));
  clock.Advance(1);
  body = Scrape(metrics);
  EXPECT_THAT(body, Not(HasSubstr("job_id=")));
  EXPECT_THAT(metrics.JobsWithSeries(), IsEmpty());
  // The counts by state stay.
  EXPECT_THAT(body, HasSubstr("pipetrain_jobs{state=\"succeeded\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_jobs{state=\"failed\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_jobs{state=\"running\"} 0\n"));
}

// Through the daemon: JobManager reports every transition and step, and the config's retention
// (zero here: removed at the next scrape) applies.
TEST(JobMetricsTest, CoordinatorRemovesAFinishedJobsSeriesAfterItsRetention) {
  testing::FakeJobStore store;
  testing::FakeWorkerClient workers;
  CoordinatorConfig config = testing::InProcessConfig(&store, &workers);
  config.job_metrics_retention = absl::ZeroDuration();
  std::unique_ptr<Coordinator> coordinator =
      testing::StartWithFakeSteps(config, &workers, absl::ZeroDuration());
  testing::AddWorker(coordinator->registry(), 0);
  testing::AddWorker(coordinator->registry(), 1);
  const std::string running =
      coordinator->jobs().Submit(testing::SmallSpec(2, 3)).value().id();
  ASSERT_TRUE(testing::WaitUntil([&] {
    return coordinator->jobs().Get(running).value().state() == v1::JOB_STATE_SUCCEEDED;
  }));
  // A second job waits for workers (its 3 ranks never come): its series stay.
  const std::string waiting =
      coordinator->jobs().Submit(testing::SmallSpec(3, 3)).value().id();
  ASSERT_TRUE(testing::WaitUntil([&] {
    return coordinator->jobs().Get(waiting).value().state() ==
           v1::JOB_STATE_WAITING_FOR_WORKERS;
  }));
  const std::string body = Scrape(coordinator->metrics());
  EXPECT_THAT(body, Not(HasSubstr(running)));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_state{job_id=\"" + waiting +
                              "\",state=\"waiting_for_workers\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_predicted_step_seconds{job_id=\"" + waiting));
  EXPECT_THAT(coordinator->metrics().JobsWithSeries(), ElementsAre(waiting));
  // The daemon's build is on the same endpoint.
  EXPECT_THAT(body, HasSubstr("pipetrain_build_info{program=\"pipetrain-coordinator\""));
  workers.Shutdown();
  coordinator->Shutdown();
}

}  // namespace
}  // namespace pipetrain::coordinator
