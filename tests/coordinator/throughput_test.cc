// The numbers users compare (docs/training.md, "Metrics"), as the coordinator aggregates them
// from step reports: tokens/s, model FLOP/s and MFU per step and over the job, the learning
// rate, skipped steps and validation passes; and their Prometheus exposition.
#include <cmath>
#include <string>

#include <prometheus/text_serializer.h>

#include "coordinator/metrics.h"
#include "coordinator/step_aggregator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <prometheus/registry.h>

namespace pipetrain::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::StepReport Report(int rank, int step, int64_t duration_ns, bool holds_loss) {
  v1::StepReport r;
  r.set_rank(rank);
  r.set_step(step);
  r.set_step_duration_ns(duration_ns);
  r.set_has_loss(holds_loss);
  r.set_loss(holds_loss ? 2.0 : 0.0);
  r.set_learning_rate(1e-3 * (step + 1));
  return r;
}

std::string Scrape(const CoordinatorMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.collectable()->Collect());
}

TEST(ThroughputTest, StepAndJobRatesFollowFromTheSlowestRank) {
  // 64 tokens and 1 GFLOP per step on workers whose peak is 8 GFLOP/s.
  StepAggregator aggregator(2, StepWork{64, 1e9, 8e9});
  v1::Job job;
  // Step 0: the slowest rank took 0.5 s (the other 0.25 s).
  aggregator.Add(Report(0, 0, 250'000'000, false), &job);
  ASSERT_EQ(aggregator.Add(Report(1, 0, 500'000'000, true), &job).size(), 1u);
  EXPECT_DOUBLE_EQ(job.last_step_s(), 0.5);
  EXPECT_DOUBLE_EQ(job.tokens_per_s(), 128);
  EXPECT_EQ(job.model_flops_per_step(), 1e9);
  EXPECT_DOUBLE_EQ(job.model_flops_per_s(), 2e9);
  EXPECT_DOUBLE_EQ(job.mfu(), 0.25);
  EXPECT_EQ(job.learning_rate(), 1e-3);
  // Step 1 took 1.5 s: per step 64 / 1.5 tokens/s; over the job 128 tokens in 2 s.
  aggregator.Add(Report(0, 1, 1'500'000'000, false), &job);
  aggregator.Add(Report(1, 1, 1'000'000'000, true), &job);
  EXPECT_DOUBLE_EQ(job.tokens_per_s(), 64 / 1.5);
  EXPECT_DOUBLE_EQ(job.mfu(), 1e9 / 1.5 / 8e9);
  EXPECT_EQ(job.timed_steps(), 2);
  EXPECT_DOUBLE_EQ(job.trained_s(), 2.0);
  EXPECT_DOUBLE_EQ(job.mean_tokens_per_s(), 64);
  EXPECT_DOUBLE_EQ(job.mean_model_flops_per_s(), 1e9);
  EXPECT_DOUBLE_EQ(job.mean_mfu(), 0.125);
  EXPECT_EQ(job.learning_rate(), 2e-3);
  ASSERT_EQ(job.learning_rates_size(), 2);  // every step's, in order
  EXPECT_EQ(job.learning_rates(0), 1e-3);
  EXPECT_EQ(job.learning_rates(1), 2e-3);
}

TEST(ThroughputTest, UnknownPeakGivesNoMfu) {
  StepAggregator aggregator(1, StepWork{10, 5e8, 0});
  v1::Job job;
  aggregator.Add(Report(0, 0, 1'000'000'000, true), &job);
  EXPECT_DOUBLE_EQ(job.model_flops_per_s(), 5e8);
  EXPECT_EQ(job.mfu(), 0);
  EXPECT_EQ(job.mean_mfu(), 0);
}

TEST(ThroughputTest, ValidationPassesAreKeptInStepOrderAndRedonePassesReplaced) {
  StepAggregator aggregator(2, StepWork{8, 1, 0});
  v1::Job job;
  auto step = [&](StepAggregator& aggregator, int s, double val_loss) {
    v1::StepReport loss = Report(1, s, 1000, true);
    loss.set_evaluated(true);
    loss.set_has_val_loss(true);
    loss.set_val_loss(val_loss);
    loss.set_eval_duration_ns(250'000'000);
    v1::StepReport other = Report(0, s, 1000, false);
    other.set_evaluated(true);  // every rank ran the pass; only the last stage has its loss
    aggregator.Add(other, &job);
    aggregator.Add(loss, &job);
  };
  step(aggregator, 0, std::log(10.0));
  aggregator.Add(Report(0, 1, 1000, false), &job);  // step 1: no pass
  aggregator.Add(Report(1, 1, 1000, true), &job);
  step(aggregator, 2, std::log(4.0));
  ASSERT_EQ(job.evaluations_size(), 2);
  EXPECT_EQ(job.evaluations(0).step(), 1);  // after 1 completed step
  EXPECT_EQ(job.evaluations(0).loss(), std::log(10.0));
  EXPECT_DOUBLE_EQ(job.evaluations(0).perplexity(), 10.0);
  EXPECT_DOUBLE_EQ(job.evaluations(0).duration_s(), 0.25);
  EXPECT_EQ(job.evaluations(1).step(), 3);
  EXPECT_DOUBLE_EQ(job.evaluations(1).perplexity(), 4.0);

  // A recovery resumes from step 0 (the checkpoint-less start): the redone passes replace
  // theirs, and the order stays by step.
  StepAggregator resumed(2, StepWork{8, 1, 0}, /*first_step=*/0);
  step(resumed, 0, std::log(9.0));
  ASSERT_EQ(job.evaluations_size(), 2);
  EXPECT_EQ(job.evaluations(0).step(), 1);
  EXPECT_DOUBLE_EQ(job.evaluations(0).perplexity(), 9.0);
  EXPECT_EQ(job.evaluations(1).step(), 3);
}

// The bubble per rank: each rank's compute-action time against the step (the slowest rank's
// duration); the mean over ranks is the step bubble. None when a rank sent no timings.
TEST(ThroughputTest, RankBubblesSplitTheStepBubble) {
  StepAggregator aggregator(2, StepWork{64, 1e9, 8e9});
  v1::Job job;
  auto timed = [](v1::StepReport r, int64_t compute_ns) {
    v1::ActionTiming* f = r.add_timings();
    f->mutable_action()->set_kind(v1::ACTION_KIND_F);
    f->set_start_ns(0);
    f->set_end_ns(compute_ns / 2);
    v1::ActionTiming* send = r.add_timings();  // not compute
    send->mutable_action()->set_kind(v1::ACTION_KIND_SEND_ACT);
    send->set_start_ns(compute_ns / 2);
    send->set_end_ns(compute_ns);
    v1::ActionTiming* bw = r.add_timings();
    bw->mutable_action()->set_kind(v1::ACTION_KIND_BW);
    bw->set_start_ns(compute_ns);
    bw->set_end_ns(compute_ns + compute_ns / 2);
    return r;
  };
  // Step 800 ms (rank 1's); rank 0 computes 200 ms, rank 1 600 ms.
  aggregator.Add(timed(Report(0, 0, 400'000'000, false), 200'000'000), &job);
  std::vector<CompletedStep> done =
      aggregator.Add(timed(Report(1, 0, 800'000'000, true), 600'000'000), &job);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].rank_bubble_ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(done[0].rank_bubble_ratios[0], 0.75);
  EXPECT_DOUBLE_EQ(done[0].rank_bubble_ratios[1], 0.25);
  EXPECT_DOUBLE_EQ(job.measured_step_bubble_ratio(),
                   (done[0].rank_bubble_ratios[0] + done[0].rank_bubble_ratios[1]) / 2);
  // A step one rank reports without timings has no per-rank bubble.
  aggregator.Add(timed(Report(0, 1, 400'000'000, false), 200'000'000), &job);
  done = aggregator.Add(Report(1, 1, 800'000'000, true), &job);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].rank_bubble_ratios.empty());
}

TEST(ThroughputMetricsTest, ExpositionHasTheComparedSeries) {
  CoordinatorMetrics metrics;
  v1::Job job;
  job.set_id("job-000007");
  job.set_steps_done(4);
  job.set_tokens_per_s(128);
  job.set_model_flops_per_s(2e9);
  job.set_mfu(0.25);
  job.set_peak_flops_per_s(8e9);
  job.set_mean_tokens_per_s(64);
  job.set_mean_model_flops_per_s(1e9);
  job.set_mean_mfu(0.125);
  job.set_learning_rate(0.0009765625);  // 2^-10: prints exactly
  job.add_skipped_steps(1);
  job.add_skipped_steps(3);  // the step just completed (steps_done - 1)
  v1::EvalResult* eval = job.add_evaluations();
  eval->set_step(4);
  eval->set_loss(1.5);
  eval->set_perplexity(std::exp(1.5));
  metrics.JobStep(job);
  const std::string body = Scrape(metrics);
  const std::string id = "{job_id=\"job-000007\"} ";
  EXPECT_THAT(body, HasSubstr("pipetrain_job_model_flops_per_second" + id + "2000000000"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_mfu_ratio" + id + "0.25"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_peak_flops_per_second" + id + "8000000000"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_mean_tokens_per_second" + id + "64"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_mean_model_flops_per_second" + id + "1000000000"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_mean_mfu_ratio" + id + "0.125"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_learning_rate" + id + "0.0009765625"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_skipped_steps_total" + id + "1"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_validation_loss" + id + "1.5"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_validation_step" + id + "4"));
  EXPECT_THAT(body, HasSubstr("pipetrain_job_validation_perplexity" + id + "4.48168907"));
  EXPECT_THAT(body, HasSubstr("# TYPE pipetrain_job_skipped_steps_total counter"));

  // A step that skipped nothing leaves the counter; a job whose peak is unknown has no MFU
  // series at all.
  job.set_steps_done(5);
  metrics.JobStep(job);
  v1::Job unknown;
  unknown.set_id("job-000008");
  unknown.set_steps_done(1);
  unknown.set_model_flops_per_s(3e9);
  metrics.JobStep(unknown);
  const std::string after = Scrape(metrics);
  EXPECT_THAT(after, HasSubstr("pipetrain_job_skipped_steps_total" + id + "1"));
  EXPECT_THAT(after, HasSubstr("pipetrain_job_model_flops_per_second{job_id=\"job-000008\"} "
                               "3000000000"));
  EXPECT_THAT(after, Not(HasSubstr("pipetrain_job_mfu_ratio{job_id=\"job-000008\"}")));
  EXPECT_THAT(after, Not(HasSubstr("pipetrain_job_peak_flops_per_second{job_id=\"job-000008\"}")));
  EXPECT_THAT(after, Not(HasSubstr("pipetrain_job_validation_loss{job_id=\"job-000008\"}")));
}

}  // namespace
}  // namespace pipetrain::coordinator
