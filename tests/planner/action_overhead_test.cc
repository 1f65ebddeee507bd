// The fixed per-action overhead (planner/action_overhead.h): the fit of time = overhead + size x
// per-sample (exact where the arithmetic is), the planner's use of it (every analytic F, B and W
// carries it once per block of its stage), and the microbatch-size search, which with analytic costs alone preferred
// microbatches of 1 and with an overhead fitted from stated measurements that say a larger
// microbatch is faster per sample no longer does.
#include "planner/action_overhead.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/cost_model.h"
#include "model/job_model.h"
#include "planner/data_parallel_search.h"
#include "planner/planner.h"
#include "tests/planner/small_job.h"

namespace pipetrain::planner {
namespace {

TEST(ActionOverheadTest, TwoSizesGiveTheLineThroughThem) {
  // Times exact in binary: the fit is exact.
  auto fit = FitActionTimes({{1, 0.375, 0.5, 0.25}, {3, 0.875, 1.0, 0.25}});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->forward.overhead_s, 0.125);
  EXPECT_EQ(fit->forward.per_sample_s, 0.25);
  EXPECT_EQ(fit->backward_input.overhead_s, 0.25);
  EXPECT_EQ(fit->backward_input.per_sample_s, 0.25);
  EXPECT_EQ(fit->backward_weight.overhead_s, 0.25);
  EXPECT_EQ(fit->backward_weight.per_sample_s, 0.0);
  EXPECT_EQ(fit->Overhead().backward_input_s, 0.25);
  EXPECT_EQ(fit->forward.At(16), 0.125 + 16 * 0.25);
}

TEST(ActionOverheadTest, MoreSizesGiveTheLeastSquaresLine) {
  // y = 1, 3, 3, 5 at x = 1..4: slope sum((x - 2.5)(y - 3)) / sum((x - 2.5)^2) = 6 / 5, intercept
  // 3 - 1.2 x 2.5 = 0. Not exact in binary: within a few ulps.
  auto fit = FitActionTimes({{1, 1, 1, 1}, {2, 3, 3, 3}, {3, 3, 3, 3}, {4, 5, 5, 5}});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_DOUBLE_EQ(fit->forward.per_sample_s, 1.2);
  EXPECT_NEAR(fit->forward.overhead_s, 0.0, 1e-15);
  // Points on a line are found again (150 us + 40 us per sample), within rounding.
  std::vector<SizedActionTimes> line;
  for (int size : {1, 4, 16}) {
    const double t = 150e-6 + size * 40e-6;
    line.push_back({size, t, t, t});
  }
  fit = FitActionTimes(line);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->backward_weight.overhead_s, 150e-6, 1e-18);
  EXPECT_NEAR(fit->backward_weight.per_sample_s, 40e-6, 1e-18);
}

TEST(ActionOverheadTest, RejectsWhatCannotBeFitted) {
  EXPECT_EQ(FitActionTimes({{4, 1, 1, 1}, {4, 2, 2, 2}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // one size
  EXPECT_EQ(FitActionTimes({{0, 1, 1, 1}, {4, 2, 2, 2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitActionTimes({{1, -1, 1, 1}, {4, 2, 2, 2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitActionTimes({{1, NAN, 1, 1}, {4, 2, 2, 2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

using testing::SmallJob;

constexpr double kRate = 1e9;  // the assumed device FLOP/s in these tests

PlannerOptions Analytic(const ActionOverhead& overhead) {
  PlannerOptions options;
  options.device_flops_per_s = kRate;
  options.action_overhead = overhead;
  return options;
}

TEST(ActionOverheadTest, EveryAnalyticActionCarriesTheOverheadOfItsBlocks) {
  const ActionOverhead overhead{100e-6, 70e-6, 50e-6};
  const v1::JobSpec spec = SmallJob("1f1b", 2, 1);
  auto with = PlanJob(spec, Analytic(overhead));
  auto without = PlanJob(spec, Analytic({}));
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  auto config = model::ModelConfig(spec);
  ASSERT_TRUE(config.ok());
  auto split = model::SplitEvenly(*config, 2);
  ASSERT_TRUE(split.ok());
  for (int s = 0; s < 2; ++s) {
    const model::ChunkCost c = model::EstimateChunkCost(*config, (*split)[s], 4);
    EXPECT_DOUBLE_EQ(without->costs.stages[s].f, c.forward_flops / kRate);
    // Two blocks per stage.
    EXPECT_DOUBLE_EQ(with->costs.stages[s].f, 2 * 100e-6 + c.forward_flops / kRate);
    EXPECT_DOUBLE_EQ(with->costs.stages[s].b, 2 * 70e-6 + c.backward_input_flops / kRate);
    EXPECT_DOUBLE_EQ(with->costs.stages[s].w, 2 * 50e-6 + c.backward_weight_flops / kRate);
  }
  EXPECT_GT(with->sim.makespan, without->sim.makespan);
  EXPECT_NE(with->plan.explanation().find("+ 100/70/50 us per F/B/W action and block"),
            std::string::npos)
      << with->plan.explanation();
  // One worker, one stage of 4 blocks: the step is every action in a row, so the overhead adds
  // exactly 8 microbatches x 4 blocks x (100 + 70 + 50) us.
  auto one = PlanJob(SmallJob("1f1b", 1, 1), Analytic(overhead));
  auto one_plain = PlanJob(SmallJob("1f1b", 1, 1), Analytic({}));
  ASSERT_TRUE(one.ok() && one_plain.ok());
  EXPECT_NEAR(one->sim.makespan - one_plain->sim.makespan, 8 * 4 * 220e-6, 1e-15);
}

TEST(ActionOverheadTest, MeasuredCostsOfAnotherSplitKeepTheOverheadPerAction) {
  // Profiled on 2 stages of 2 blocks: each action's measured time is twice the overhead plus its
  // FLOPs at 2 GFLOP/s. Planned on 4 stages of one block (another split), each action gets the
  // overhead once plus its own FLOPs at the rate that remains once the overhead is taken out:
  // the same law.
  const ActionOverhead overhead{100e-6, 70e-6, 50e-6};
  const v1::JobSpec spec = SmallJob("1f1b", 2, 1);
  auto config = model::ModelConfig(spec);
  ASSERT_TRUE(config.ok());
  MeasuredStageCosts measured;
  measured.num_stages = 2;
  auto two = model::SplitEvenly(*config, 2);
  ASSERT_TRUE(two.ok());
  for (const model::ChunkSpec& s : *two) {
    const model::ChunkCost c = model::EstimateChunkCost(*config, s, 4);
    measured.forward_s.push_back(2 * overhead.forward_s + c.forward_flops / 2e9);
    measured.backward_input_s.push_back(2 * overhead.backward_input_s +
                                        c.backward_input_flops / 2e9);
    measured.backward_weight_s.push_back(2 * overhead.backward_weight_s +
                                         c.backward_weight_flops / 2e9);
  }
  PlannerOptions options = Analytic(overhead);
  options.measured = measured;
  auto planned = PlanJob(SmallJob("1f1b", 4, 1), options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto four = model::SplitEvenly(*config, 4);
  ASSERT_TRUE(four.ok());
  for (int s = 0; s < 4; ++s) {
    const model::ChunkCost c = model::EstimateChunkCost(*config, (*four)[s], 4);
    EXPECT_NEAR(planned->costs.stages[s].f, 100e-6 + c.forward_flops / 2e9, 1e-15) << s;
    EXPECT_NEAR(planned->costs.stages[s].b, 70e-6 + c.backward_input_flops / 2e9, 1e-15) << s;
    EXPECT_NEAR(planned->costs.stages[s].w, 50e-6 + c.backward_weight_flops / 2e9, 1e-15) << s;
  }
}

// The mean stage's FLOPs of each kind for one sample of the job's model on p stages.
SizedActionTimes FlopsPerSample(const v1::JobSpec& spec, int p) {
  auto config = model::ModelConfig(spec);
  auto split = model::SplitEvenly(*config, p);
  SizedActionTimes flops;
  for (const model::ChunkSpec& s : *split) {
    const model::ChunkCost c = model::EstimateChunkCost(*config, s, 1);
    flops.forward_s += c.forward_flops / p;
    flops.backward_input_s += c.backward_input_flops / p;
    flops.backward_weight_s += c.backward_weight_flops / p;
  }
  return flops;
}

TEST(ActionOverheadTest, SizeSearchNoLongerPrefersMicrobatchesOfOne) {
  // Stated measurements of a one-block stage's actions (the 4-stage split) at microbatches of 1
  // and 16: a fixed 200 / 150 / 120 us per F / B / W plus the model's FLOPs at 1 GFLOP/s. Per
  // sample, 16 is faster: F takes 200 us + 16 c at 16 against 16 (200 us + c) for 16 of 1.
  const v1::JobSpec spec = SmallJob("auto", 1, 1);
  const SizedActionTimes per_sample = FlopsPerSample(spec, 4);
  std::vector<SizedActionTimes> stated;
  for (int size : {1, 16}) {
    stated.push_back({size, 200e-6 + size * per_sample.forward_s / kRate,
                      150e-6 + size * per_sample.backward_input_s / kRate,
                      120e-6 + size * per_sample.backward_weight_s / kRate});
  }
  auto fit = FitActionTimes(stated);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->forward.overhead_s, 200e-6, 1e-15);
  EXPECT_NEAR(fit->backward_input.overhead_s, 150e-6, 1e-15);
  EXPECT_NEAR(fit->backward_weight.overhead_s, 120e-6, 1e-15);
  EXPECT_NEAR(fit->forward.per_sample_s, per_sample.forward_s / kRate, 1e-15);
  EXPECT_LT(stated[1].forward_s / 16, stated[0].forward_s);  // larger is faster per sample

  // Compute is the question here: links without latency (a message per microbatch would
  // otherwise favour fewer, larger microbatches on its own).
  PlannerOptions plain = Analytic({});
  plain.link_latency_s = 0;
  plain.search_microbatch_size = true;
  PlannerOptions fitted = plain;
  fitted.action_overhead = fit->Overhead();
  // A device per worker: without the overhead the smallest microbatches win (the bubble
  // shrinks, nothing grows).
  auto before = SearchDataParallel(spec, 4, plain);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->candidates[before->chosen].microbatch_size, 1)
      << FormatDataParallelSearch(*before);
  // With it, and also with the 4 workers sharing 2 cores (where without it every size costs
  // the same work and the choice is a matter of rounding), a larger size wins, and on every
  // split microbatches of 1 are slower than the choice.
  for (int cores : {0, 2}) {
    fitted.shared_host_cores = cores;
    auto after = SearchDataParallel(spec, 4, fitted);
    ASSERT_TRUE(after.ok()) << after.status();
    const DataParallelCandidate& chosen = after->candidates[after->chosen];
    EXPECT_GT(chosen.microbatch_size, 1) << cores << "\n" << FormatDataParallelSearch(*after);
    for (const DataParallelCandidate& c : after->candidates) {
      if (c.rejected.empty() && c.microbatch_size == 1) {
        EXPECT_GT(c.step_s, chosen.step_s) << cores << " cores, d = " << c.replicas;
      }
    }
  }
  // One worker (no bubble to trade): the step is the FLOPs plus the overhead of each action, so
  // the fewest, largest microbatches are fastest: one microbatch of 32.
  auto alone = SearchDataParallel(spec, 1, fitted);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->candidates[alone->chosen].microbatch_size, 32)
      << FormatDataParallelSearch(*alone);
}

}  // namespace
}  // namespace pipetrain::planner
