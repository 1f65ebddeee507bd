// JobSeries (common/job_series.h): a job's series stay for the retention after Ended and are
// gone from the first collection after it; other jobs' series and untracked ones stay.
#include "common/job_series.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/text_serializer.h>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/manual_clock.h"

namespace pipetrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kMinuteNs = 60'000'000'000;

std::string Scrape(const JobSeries& series) {
  return prometheus::TextSerializer().Serialize(series.collectable()->Collect());
}

class JobSeriesTest : public ::testing::Test {
 protected:
  JobSeriesTest()
      : registry_(std::make_shared<prometheus::Registry>()),
        series_(registry_, JobSeriesOptions{absl::Minutes(10), &clock_}),
        steps_(prometheus::BuildCounter().Name("t_steps_total").Help("h").Register(*registry_)),
        peak_(prometheus::BuildGauge().Name("t_peak_bytes").Help("h").Register(*registry_)),
        seconds_(prometheus::BuildHistogram().Name("t_step_seconds").Help("h").Register(*registry_)),
        untracked_(prometheus::BuildGauge().Name("t_workers").Help("h").Register(*registry_)) {}

  ManualClock clock_;
  std::shared_ptr<prometheus::Registry> registry_;
  JobSeries series_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Gauge>& peak_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  prometheus::Family<prometheus::Gauge>& untracked_;
};

TEST_F(JobSeriesTest, AJobsSeriesGoOnceItsRetentionHasPassed) {
  untracked_.Add({}).Set(4);
  for (const char* job : {"job-000001", "job-000002"}) {
    series_.Get(steps_, job, {{"job_id", job}}).Increment(3);
    series_.Get(peak_, job, {{"job_id", job}, {"rank", "0"}}).Set(1000);
    series_.Get(peak_, job, {{"job_id", job}, {"rank", "1"}}).Set(2000);
    series_.Get(seconds_, job, {{"job_id", job}}, prometheus::Histogram::BucketBoundaries{1, 2})
        .Observe(1.5);
  }
  // The same labels again are the same series, not a second one.
  series_.Get(steps_, "job-000001", {{"job_id", "job-000001"}}).Increment();
  EXPECT_THAT(Scrape(series_), HasSubstr("t_steps_total{job_id=\"job-000001\"} 4"));

  clock_.Advance(kMinuteNs);
  series_.Ended("job-000001");
  series_.Ended("job-000099");  // unknown: ignored
  EXPECT_THAT(series_.Jobs(), ElementsAre("job-000001", "job-000002"));

  // One nanosecond short of the retention: still scraped, with their final values.
  clock_.Advance(10 * kMinuteNs - 1);
  std::string body = Scrape(series_);
  EXPECT_THAT(body, HasSubstr("t_steps_total{job_id=\"job-000001\"} 4"));
  EXPECT_THAT(body, HasSubstr("t_peak_bytes{job_id=\"job-000001\",rank=\"1\"} 2000"));
  EXPECT_THAT(body, HasSubstr("t_step_seconds_count{job_id=\"job-000001\"} 1"));

  // At the retention: gone at the first scrape; the other job and the untracked series stay.
  clock_.Advance(1);
  body = Scrape(series_);
  EXPECT_THAT(body, Not(HasSubstr("job-000001")));
  EXPECT_THAT(body, HasSubstr("t_steps_total{job_id=\"job-000002\"} 3"));
  EXPECT_THAT(body, HasSubstr("t_peak_bytes{job_id=\"job-000002\",rank=\"0\"} 1000"));
  EXPECT_THAT(body, HasSubstr("t_step_seconds_bucket{job_id=\"job-000002\",le=\"2\"} 1"));
  EXPECT_THAT(body, HasSubstr("t_workers 4"));
  EXPECT_THAT(series_.Jobs(), ElementsAre("job-000002"));
}

TEST_F(JobSeriesTest, ASeriesAddedAfterTheEndKeepsTheJob) {
  series_.Get(steps_, "job-000003", {{"job_id", "job-000003"}}).Increment();
  series_.Ended("job-000003");
  clock_.Advance(5 * kMinuteNs);
  // The worker got the job again (a recovery): it runs until the next end.
  series_.Get(peak_, "job-000003", {{"job_id", "job-000003"}, {"rank", "2"}}).Set(7);
  clock_.Advance(60 * kMinuteNs);
  series_.Sweep();
  EXPECT_THAT(Scrape(series_), HasSubstr("t_peak_bytes{job_id=\"job-000003\",rank=\"2\"} 7"));
  series_.Ended("job-000003");
  clock_.Advance(10 * kMinuteNs);
  series_.Sweep();
  EXPECT_THAT(series_.Jobs(), ElementsAre());
  // Both the series from before and after the first end are gone.
  EXPECT_THAT(Scrape(series_), Not(HasSubstr("job-000003")));
}

TEST(JobSeriesZeroRetentionTest, RemovedAtTheNextScrape) {
  ManualClock clock;
  auto registry = std::make_shared<prometheus::Registry>();
  JobSeries series(registry, JobSeriesOptions{absl::ZeroDuration(), &clock});
  auto& gauge = prometheus::BuildGauge().Name("t_loss").Help("h").Register(*registry);
  series.Get(gauge, "job-000004", {{"job_id", "job-000004"}}).Set(0.5);
  EXPECT_THAT(Scrape(series), HasSubstr("t_loss{job_id=\"job-000004\"} 0.5"));
  series.Ended("job-000004");
  EXPECT_THAT(Scrape(series), Not(HasSubstr("job-000004")));
}

// The collectable an Exposer holds keeps working after the JobSeries is gone.
TEST(JobSeriesLifetimeTest, CollectableOutlivesTheSeries) {
  std::shared_ptr<prometheus::Collectable> collectable;
  {
    auto registry = std::make_shared<prometheus::Registry>();
    JobSeries series(registry, JobSeriesOptions{});
    auto& gauge = prometheus::BuildGauge().Name("t_left").Help("h").Register(*registry);
    series.Get(gauge, "job-000005", {{"job_id", "job-000005"}}).Set(2);
    collectable = series.collectable();
  }
  EXPECT_THAT(prometheus::TextSerializer().Serialize(collectable->Collect()),
              HasSubstr("t_left{job_id=\"job-000005\"} 2"));
}

}  // namespace
}  // namespace pipetrain
