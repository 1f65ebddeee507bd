// Data parallelism before any worker runs: the spec's checks (clear errors naming the field and
// the allowed values), the plan of one replica with its gradient-sum prediction, the plan file
// of d x p workers, and the search over d x p = N.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/cost_model.h"
#include "model/job_model.h"
#include "model/job_spec_validation.h"
#include "planner/data_parallel_search.h"
#include "planner/plan_file.h"
#include "planner/planner.h"
#include "planner/shared_host.h"
#include "schedule/data_parallel_step.h"
#include "tests/planner/small_job.h"

namespace pipetrain::planner {
namespace {

using testing::SmallJob;

std::string Error(const v1::JobSpec& spec) {
  const absl::Status s = model::ValidateJobSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(DataParallelSpecTest, DefaultsToOneReplica) {
  const v1::JobSpec spec = model::WithDefaults(SmallJob("1f1b", 2, 0));
  EXPECT_EQ(spec.parallelism().data_parallel(), 1);
  EXPECT_EQ(model::DataParallelSize(SmallJob("1f1b", 2, 0)), 1);
  EXPECT_EQ(model::TotalWorkers(SmallJob("1f1b", 2, 3)), 6);
  EXPECT_EQ(model::MicrobatchesPerReplica(SmallJob("1f1b", 2, 4)), 2);
  EXPECT_TRUE(model::ValidateJobSpec(SmallJob("1f1b", 2, 4)).ok());
}

TEST(DataParallelSpecTest, ErrorsNameTheFieldAndTheAllowedValues) {
  EXPECT_EQ(Error(SmallJob("1f1b", 2, -1)),
            "parallelism.data_parallel: -1 is not allowed; allowed: 0..64");
  EXPECT_EQ(Error(SmallJob("1f1b", 2, 65)),
            "parallelism.data_parallel: 65 is not allowed; allowed: 0..64");
  // 8 microbatches do not split into 3 equal shares.
  EXPECT_EQ(Error(SmallJob("1f1b", 2, 3)),
            "training.global_batch: 32 is not allowed; with parallelism.data_parallel 3 each "
            "replica trains an equal share of every step's microbatches: global_batch / "
            "microbatch_size (8) must be a multiple of 3, i.e. global_batch a multiple of 12");
  v1::JobSpec too_many = SmallJob("1f1b", 4000, 2);
  EXPECT_EQ(Error(too_many),
            "parallelism.data_parallel: 2 is not allowed; data_parallel x num_workers (4000) "
            "workers must be at most 4096");
  // CUDA workers run replicas too (over the staged TCP transport).
  v1::JobSpec cuda = SmallJob("1f1b", 2, 2);
  cuda.mutable_compute()->set_device(v1::DEVICE_KIND_CUDA);
  EXPECT_TRUE(model::ValidateJobSpec(cuda).ok()) << model::ValidateJobSpec(cuda);
  v1::JobSpec emulated = SmallJob("1f1b", 2, 2);
  emulated.mutable_compute()->set_device(v1::DEVICE_KIND_EMULATED);
  EXPECT_NE(Error(emulated).find("emulated compute has no gradients"), std::string::npos);
  // An unset device means CPU workers for a data-parallel job.
  EXPECT_EQ(model::RequiredDeviceKind(SmallJob("1f1b", 2, 2)), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(model::RequiredDeviceKind(SmallJob("1f1b", 2, 1)), v1::DEVICE_KIND_UNSPECIFIED);
}

TEST(DataParallelPlanTest, PlansOneReplicaWithTheGradientSums) {
  const v1::JobSpec spec = SmallJob("1f1b", 2, 2);
  PlannerOptions options;
  options.link_bytes_per_s = 1e9;
  options.link_latency_s = 1e-4;
  auto planned = PlanJob(spec, options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(planned->schedule.num_microbatches, 4);  // 8 over 2 replicas
  EXPECT_EQ(planned->plan.data_parallel(), 2);
  EXPECT_EQ(planned->plan.allreduce_bytes_per_s(), 1e9);
  const v1::Prediction& pred = planned->plan.prediction();
  ASSERT_EQ(pred.stage_allreduce_s_size(), planned->schedule.num_stages);
  auto config = model::ModelConfig(spec);
  ASSERT_TRUE(config.ok());
  auto split = model::SplitEvenly(*config, planned->schedule.num_stages);
  ASSERT_TRUE(split.ok());
  double latest = pred.makespan_s();
  for (int s = 0; s < planned->schedule.num_stages; ++s) {
    const int64_t bytes = model::EstimateChunkCost(*config, (*split)[s], 4).parameter_bytes;
    // 2 (d - 1) hops of latency + bytes / bandwidth.
    EXPECT_DOUBLE_EQ(pred.stage_allreduce_s(s), 2.0 * (1e-4 + bytes / 1e9)) << "stage " << s;
  }
  auto step = schedule::SimulateDataParallelStep(
      planned->schedule, planned->sim,
      {pred.stage_allreduce_s().begin(), pred.stage_allreduce_s().end()});
  ASSERT_TRUE(step.ok()) << step.status();
  for (double end : step->allreduce_end) latest = std::max(latest, end);
  EXPECT_DOUBLE_EQ(pred.data_parallel_step_s(), latest);
  EXPECT_GT(pred.data_parallel_step_s(), pred.makespan_s());  // stage 0's W ends last
  EXPECT_NE(planned->plan.explanation().find("x2 data-parallel replicas (4 workers)"),
            std::string::npos)
      << planned->plan.explanation();
  // One replica: no sums.
  auto single = PlanJob(SmallJob("1f1b", 2, 1), options);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->plan.prediction().stage_allreduce_s_size(), 0);
  EXPECT_EQ(single->plan.prediction().data_parallel_step_s(), 0);
}

TEST(DataParallelPlanTest, PlanCarriesTheStepCpuWorkOfEveryStageAndMessage) {
  // The sums' CPU time and the optimizer step per stage: its parameter bytes over the rates;
  // every message: the fixed part and the boundary tensor's bytes over the rate.
  const v1::JobSpec spec = SmallJob("1f1b", 2, 2);
  PlannerOptions options;
  options.gradient_sum_bytes_per_s = 4e9;
  options.optimizer_bytes_per_s = 1e9;
  options.message_cpu_fixed_s = 30e-6;
  options.message_cpu_bytes_per_s = 2e9;
  auto planned = PlanJob(spec, options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto config = model::ModelConfig(spec);
  ASSERT_TRUE(config.ok());
  auto split = model::SplitEvenly(*config, 2);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(planned->cpu_work.stage_sum_cpu_s.size(), 2u);
  ASSERT_EQ(planned->cpu_work.stage_optimizer_cpu_s.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    const double bytes = model::EstimateChunkCost(*config, (*split)[s], 4).parameter_bytes;
    EXPECT_EQ(planned->cpu_work.stage_sum_cpu_s[s], bytes / 4e9) << s;
    EXPECT_EQ(planned->cpu_work.stage_optimizer_cpu_s[s], bytes / 1e9) << s;
  }
  // The boundary tensor: the first stage's output activation (both stages' are the same size).
  const int64_t boundary =
      model::EstimateChunkCost(*config, (*split)[0], 4).output_activation_bytes;
  ASSERT_GT(boundary, 0);
  EXPECT_EQ(planned->cpu_work.message_cpu_s, 30e-6 + static_cast<double>(boundary) / 2e9);
  // One replica: the optimizer step and the messages only.
  auto single = PlanJob(SmallJob("1f1b", 2, 1), options);
  ASSERT_TRUE(single.ok());
  EXPECT_TRUE(single->cpu_work.stage_sum_cpu_s.empty());
  EXPECT_EQ(single->cpu_work.stage_optimizer_cpu_s.size(), 2u);
  EXPECT_EQ(single->cpu_work.message_cpu_s, planned->cpu_work.message_cpu_s);
  // A message rate of 0 leaves that term out; so does a plan of one stage (no messages).
  options.message_cpu_bytes_per_s = 0;
  auto without = PlanJob(spec, options);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->cpu_work.message_cpu_s, 0);
  auto one = StepCpuWorkOf(spec, 1, PlannerOptions{});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->message_cpu_s, 0);
}

TEST(DataParallelPlanTest, StepIsTheLaterOfTheLastActionAndTheLastSum) {
  // Two stages; stage 1's last W ends at 5, stage 0's at 8 (the makespan).
  schedule::Schedule sched;
  sched.num_stages = 2;
  sched.num_workers = 2;
  sched.stage_to_worker = {0, 1};
  schedule::SimResult sim;
  sim.makespan = 8;
  schedule::Action w1{schedule::ActionKind::kW, 1, 3};
  schedule::Action w0{schedule::ActionKind::kBW, 0, 3};
  sim.timeline = {{w1, 1, 4, 5}, {w0, 0, 7, 8}};
  auto step = schedule::SimulateDataParallelStep(sched, sim, {0.5, 2.0});
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->last_weight_end, (std::vector<double>{8, 5}));
  EXPECT_EQ(step->allreduce_end, (std::vector<double>{8.5, 7}));
  EXPECT_EQ(step->step_s, 8.5);
  EXPECT_EQ(schedule::StageAllReduceSeconds(1000, 3, 1000, 0.25), 2 * 2 * 1.25);
  EXPECT_EQ(schedule::StageAllReduceSeconds(1000, 1, 1000, 0.25), 0);
  EXPECT_FALSE(schedule::SimulateDataParallelStep(sched, sim, {1.0}).ok());
}

TEST(DataParallelPlanTest, PlanFileListsEveryWorkerOfEveryReplica) {
  const v1::JobSpec spec = SmallJob("1f1b", 2, 2);
  auto planned = PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto file = MakePlanFile(spec, planned->plan);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->peers_size(), 4);
  EXPECT_EQ(file->peers(3).address(), "127.0.0.1:29503");
  PlanFileOptions three;
  three.addresses = {"a:1", "b:2", "c:3"};
  const absl::Status bad = MakePlanFile(spec, planned->plan, three).status();
  EXPECT_EQ(bad.message(),
            "addresses: 3 given for a job of 4 workers (2 data-parallel replica(s) x 2 pipeline "
            "ranks); give one host:port per worker");
}

TEST(DataParallelSearchTest, ListsEverySplitAndPicksTheShortestStep) {
  // 4 workers on a 4-layer model with a 1-chunk schedule: d = 1, 2, 4 (p = 4, 2, 1).
  auto search = SearchDataParallel(SmallJob("1f1b", 1, 1), 4);
  ASSERT_TRUE(search.ok()) << search.status();
  ASSERT_EQ(search->candidates.size(), 3u);
  double best = 1e300;
  for (const DataParallelCandidate& c : search->candidates) {
    EXPECT_EQ(c.replicas * c.pipeline_ranks, 4);
    EXPECT_TRUE(c.rejected.empty()) << c.rejected;
    best = std::min(best, c.step_s);
  }
  ASSERT_GE(search->chosen, 0);
  EXPECT_EQ(search->candidates[search->chosen].step_s, best);
  EXPECT_EQ(search->spec.parallelism().data_parallel() * search->spec.parallelism().num_workers(),
            4);
  const std::string table = FormatDataParallelSearch(*search);
  EXPECT_NE(table.find("<- chosen"), std::string::npos) << table;
  EXPECT_NE(table.find("chosen: "), std::string::npos) << table;
  // A V schedule needs 2 stages per rank: p = 4 has too few layers, and 3 workers split 8
  // microbatches only as d = 1.
  auto v = SearchDataParallel(SmallJob("v-half", 1, 1), 4);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_NE(v->candidates[0].rejected.find("model.num_layers"), std::string::npos)
      << v->candidates[0].rejected;
  auto three = SearchDataParallel(SmallJob("1f1b", 1, 1), 3);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_NE(three->candidates[1].rejected.find("do not split into 3 equal shares"),
            std::string::npos);
  EXPECT_EQ(SearchDataParallel(SmallJob("1f1b", 1, 1), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataParallelSearchTest, SharedHostCoresAreTheStepCompared) {
  // d = 2 replicas of a 2-rank pipeline on one 2-core host: all 4 workers compute at once, so the
  // expected step is longer than the plan of one replica with a device per worker.
  // A slow device: compute, not the links, decides the step (as on the local cluster).
  PlannerOptions two_cores;
  two_cores.device_flops_per_s = 1e6;
  two_cores.shared_host_cores = 2;
  auto planned = PlanJob(SmallJob("1f1b", 2, 2), two_cores);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const v1::Prediction& pred = planned->plan.prediction();
  EXPECT_GT(pred.shared_cpu_step_s(), pred.data_parallel_step_s());
  EXPECT_DOUBLE_EQ(ExpectedStepSeconds(pred), pred.shared_cpu_step_s());
  EXPECT_NE(pred.shared_cpu_note().find("4 CPU workers share 2 cores (--host-cores); simulated "
                                        "with shared cores, 2 replicas computing at once"),
            std::string::npos)
      << pred.shared_cpu_note();
  EXPECT_NE(planned->plan.explanation().find("4 CPU workers share 2 cores"), std::string::npos);
  // A core per worker: nothing shared.
  PlannerOptions four_cores = two_cores;
  four_cores.shared_host_cores = 4;
  auto own = PlanJob(SmallJob("1f1b", 2, 2), four_cores);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->plan.prediction().shared_cpu_step_s(), 0);
  EXPECT_DOUBLE_EQ(ExpectedStepSeconds(own->plan.prediction()),
                   own->plan.prediction().data_parallel_step_s());
  // The search compares the shared-core steps, and lists the device-per-worker ones next to them.
  auto search = SearchDataParallel(SmallJob("1f1b", 1, 1), 4, two_cores);
  ASSERT_TRUE(search.ok()) << search.status();
  double best = 1e300;
  for (const DataParallelCandidate& c : search->candidates) {
    ASSERT_TRUE(c.rejected.empty()) << c.rejected;
    EXPECT_GT(c.step_s, c.device_step_s) << c.replicas;  // 4 workers on 2 cores
    best = std::min(best, c.step_s);
  }
  EXPECT_EQ(search->candidates[search->chosen].step_s, best);
  EXPECT_NE(FormatDataParallelSearch(*search).find("workers sharing the host's cores"),
            std::string::npos);
}

TEST(DataParallelSearchTest, AutoAlsoSearchesTheMicrobatchSizeUnderTheBudget) {
  // schedule auto, a global batch of 8: every microbatch size dividing it (1, 2, 4, 8: 8..1
  // microbatches) on every split whose d divides that size's microbatches.
  auto job = [](int64_t budget) {
    v1::JobSpec spec = SmallJob("auto", 1, 1);
    spec.mutable_training()->set_global_batch(8);
    spec.mutable_training()->set_microbatch_size(2);
    spec.mutable_memory()->set_device_budget_bytes(budget);
    return spec;
  };
  // Off by default: the job's own size only.
  auto own = SearchDataParallel(job(0), 4);
  ASSERT_TRUE(own.ok()) << own.status();
  for (const DataParallelCandidate& c : own->candidates) EXPECT_EQ(c.microbatch_size, 2);
  PlannerOptions searching;
  searching.search_microbatch_size = true;
  auto search = SearchDataParallel(job(0), 4, searching);
  ASSERT_TRUE(search.ok()) << search.status();
  std::set<int> sizes, planned_sizes;
  double best = 1e300;
  for (const DataParallelCandidate& c : search->candidates) {
    if (c.replicas == 1) sizes.insert(c.microbatch_size);
    if (!c.rejected.empty()) continue;
    planned_sizes.insert(c.microbatch_size);
    EXPECT_EQ((8 / c.microbatch_size) % c.replicas, 0);
    EXPECT_EQ(c.microbatches_per_replica, 8 / c.microbatch_size / c.replicas);
    best = std::min(best, c.step_s);
  }
  EXPECT_EQ(sizes, (std::set<int>{1, 2, 4, 8}));  // d = 1 tries every size
  EXPECT_GT(planned_sizes.size(), 1u);
  const DataParallelCandidate& chosen = search->candidates[search->chosen];
  EXPECT_EQ(chosen.step_s, best);
  EXPECT_EQ(search->spec.training().microbatch_size(), chosen.microbatch_size);
  EXPECT_EQ(search->planned.plan.num_microbatches(), chosen.microbatches_per_replica);
  const std::string table = FormatDataParallelSearch(*search);
  EXPECT_NE(table.find("mbs"), std::string::npos) << table;
  EXPECT_NE(table.find(absl::StrCat("microbatches of ", chosen.microbatch_size)), std::string::npos)
      << table;
  // A budget below the chosen candidate's peak: it no longer wins, and nothing planned is over.
  const int64_t budget = static_cast<int64_t>(chosen.peak_activation_bytes) - 1;
  auto fitted = SearchDataParallel(job(budget), 4, searching);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  for (const DataParallelCandidate& c : fitted->candidates) {
    if (c.rejected.empty()) {
      EXPECT_LE(c.peak_activation_bytes, budget) << c.microbatch_size;
    }
  }
  const DataParallelCandidate& refit = fitted->candidates[fitted->chosen];
  EXPECT_FALSE(refit.replicas == chosen.replicas &&
               refit.microbatch_size == chosen.microbatch_size &&
               refit.schedule == chosen.schedule && refit.step_s == chosen.step_s);
  // A named schedule keeps the job's microbatch size.
  auto named = SearchDataParallel(SmallJob("1f1b", 1, 1), 4);
  ASSERT_TRUE(named.ok());
  for (const DataParallelCandidate& c : named->candidates) EXPECT_EQ(c.microbatch_size, 4);
}

}  // namespace
}  // namespace pipetrain::planner
