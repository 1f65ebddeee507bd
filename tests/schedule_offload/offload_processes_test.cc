// Offload end to end on the CPU backend with real pipetrain-worker processes (plan-file mode,
// TCP on loopback): the planner's offload plan (memory.offload FULL, host link given) run with
// the workers' copy thread capped at that link produces the reference losses bitwise (the same
// as the run without offload), and every rank's measured peak activation bytes equal the
// planner's simulated prediction, which is below the prediction without offload. And the planner
// over memory budgets: the plan `auto` chooses (schedules and offload plans) fits the budget in
// simulation and in the measured run; an infeasible budget says the smallest achievable peak.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "planner/planner.h"
#include "tests/e2e/e2e_jobs.h"
#include "tests/e2e/plan_files.h"
#include "tests/e2e/process_util.h"
#include "worker/service/step_line.h"

namespace pipetrain {
namespace {

constexpr int kSteps = 3;

using worker::StepLine;

// Runs the plan in p processes; returns per rank its step lines.
std::vector<std::map<int, StepLine>> RunProcesses(const v1::JobSpec& spec,
                                                  const planner::PlannedJob& planned,
                                                  double copy_bandwidth) {
  const std::string dir = testing::TempDir();
  const std::string plan_path = testing::WritePlanFile(spec, planned.plan, dir + "/plan.json");
  const int p = spec.parallelism().num_workers();
  std::vector<testing::Process> workers;
  for (int r = 0; r < p; ++r) {
    workers.push_back(testing::Spawn(
        {PIPETRAIN_WORKER_BIN, "--plan", plan_path, "--rank", std::to_string(r),
         "--connect-timeout", "20", "--recv-timeout", "30", "--copy-bandwidth",
         absl::StrCat(copy_bandwidth)},
        absl::StrCat(dir, "/rank", r)));
  }
  std::vector<std::map<int, StepLine>> out;
  for (int r = 0; r < p; ++r) {
    auto code = testing::WaitFor(workers[r], absl::Seconds(120));
    EXPECT_TRUE(code.has_value()) << "rank " << r << " hung";
    if (!code.has_value()) return {};
    EXPECT_EQ(*code, 0) << "rank " << r << ": " << testing::ReadFile(workers[r].stderr_path);
    out.push_back(worker::ParseStepLines(testing::ReadFile(workers[r].stdout_path)));
  }
  return out;
}

int CountOffloads(const schedule::Schedule& s) {
  int n = 0;
  for (const auto& list : s.worker_actions) {
    for (const schedule::Action& a : list) n += a.kind == schedule::ActionKind::kOffload;
  }
  return n;
}

// Every rank ran `steps` steps, measured exactly the predicted peak (and within `budget` when
// one is given), and the loss rank logged the reference losses.
void ExpectRunAsPredicted(const planner::PlannedJob& planned,
                          const std::vector<std::map<int, StepLine>>& runs, int steps,
                          const std::vector<double>& reference, int64_t budget = 0) {
  const int p = static_cast<int>(planned.sim.peak_memory.size());
  ASSERT_EQ(runs.size(), static_cast<size_t>(p));
  const int loss_rank = planned.schedule.WorkerOf(planned.schedule.num_stages - 1);
  for (int r = 0; r < p; ++r) {
    ASSERT_EQ(runs[r].size(), static_cast<size_t>(steps)) << "rank " << r;
    for (int step = 0; step < steps; ++step) {
      EXPECT_EQ(runs[r].at(step).peak_activation_bytes, std::llround(planned.sim.peak_memory[r]))
          << planned.schedule.name << " rank " << r << " step " << step;
      if (budget > 0) {
        EXPECT_LE(runs[r].at(step).peak_activation_bytes, budget) << "rank " << r << " step " << step;
      }
      if (r == loss_rank) {
        double loss = 0;
        ASSERT_TRUE(absl::SimpleAtod(runs[r].at(step).loss, &loss));
        EXPECT_EQ(loss, reference[step]) << planned.schedule.name << " step " << step;
      }
    }
  }
}

TEST(OffloadProcessesTest, SameLossesAndMeasuredPeakEqualsPredictedWithTheLinkCapOn) {
  v1::JobSpec plain = testing::SmallJob("interleaved-1f1b", 2, 4, kSteps);
  auto base = planner::PlanJob(plain);
  ASSERT_TRUE(base.ok()) << base.status();
  // A link "fast enough": every stage's copy at most 1/5 of its modelled F+B+W each way (k <= 0.4).
  double link = 0;
  for (const schedule::StageCost& c : base->costs.stages) {
    link = std::max(link, c.activation / (0.2 * (c.f + c.b + c.w)));
  }
  const double kLinkBytesPerS = link;
  v1::JobSpec spec = plain;
  spec.mutable_memory()->set_offload(v1::OFFLOAD_POLICY_FULL);
  spec.mutable_memory()->set_host_link_bytes_per_s(kLinkBytesPerS);
  auto planned = planner::PlanJob(spec);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_GT(CountOffloads(planned->schedule), 0) << planned->plan.explanation();
  const std::vector<double> reference = testing::ReferenceLosses(spec);
  const auto without = RunProcesses(plain, *base, 0);
  const auto with = RunProcesses(spec, *planned, kLinkBytesPerS);
  ASSERT_EQ(with.size(), 2u);
  ASSERT_EQ(without.size(), 2u);
  const int loss_rank = planned->schedule.WorkerOf(planned->schedule.num_stages - 1);
  bool lower = false;
  double time_with = 0, time_without = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(with[r].size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(without[r].size(), static_cast<size_t>(kSteps));
    lower |= planned->sim.peak_memory[r] < base->sim.peak_memory[r];
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(with[r].at(s).peak_activation_bytes, std::llround(planned->sim.peak_memory[r]))
          << "rank " << r << " step " << s << ": measured vs predicted with offload";
      EXPECT_EQ(without[r].at(s).peak_activation_bytes, std::llround(base->sim.peak_memory[r]))
          << "rank " << r << " step " << s << ": measured vs predicted without offload";
      EXPECT_EQ(with[r].at(s).loss, without[r].at(s).loss) << "rank " << r << " step " << s;
      if (r == loss_rank) {
        double loss = 0;
        ASSERT_TRUE(absl::SimpleAtod(with[r].at(s).loss, &loss));
        EXPECT_EQ(loss, reference[s]) << "step " << s;
      }
      if (s > 0) {  // step 0 includes warm-up
        time_with += with[r].at(s).time_ms;
        time_without += without[r].at(s).time_ms;
      }
    }
  }
  EXPECT_TRUE(lower) << "offload lowered no rank's predicted peak";
  // Not a timing assertion (noisy shared machine): the figure for docs/BENCHMARKS.md.
  std::printf("step time (steps 1..%d, both ranks): without offload %.1f ms, with %.1f ms (%.3fx)\n",
              kSteps - 1, time_without, time_with, time_with / time_without);
}


// Planner over budgets (issue 7): schedule auto, offload policy AUTO, a fast host link. At each
// budget the chosen plan's simulated peak fits, the processes measure exactly that peak on every
// rank (so it fits too) and train the reference losses; tighter budgets pick lower-memory plans;
// a budget below what any plan reaches fails with the smallest achievable peak.
TEST(OffloadProcessesTest, PlannerOverBudgetsFitsInSimulationAndInTheMeasuredRun) {
  constexpr int kP = 4, kM = 8, kBudgetSteps = 2;
  v1::JobSpec spec = testing::SmallJob("auto", kP, kM, kBudgetSteps);
  auto unlimited = planner::PlanJob(spec);
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  double link = 0;  // each stage's copy at most 1/5 of its modelled F+B+W each way (k <= 0.4)
  for (const schedule::StageCost& c : unlimited->costs.stages) {
    link = std::max(link, c.activation / (0.2 * (c.f + c.b + c.w)));
  }
  spec.mutable_memory()->set_offload(v1::OFFLOAD_POLICY_AUTO);
  spec.mutable_memory()->set_host_link_bytes_per_s(link);
  const double unit = unlimited->bytes_per_unit;  // one microbatch's activations, a worker share
  const std::vector<double> reference = testing::ReferenceLosses(spec);
  std::set<std::string> chosen;
  double last_peak = 1e300;
  for (double units : {4.0, 3.0, 2.0, 1.5}) {
    const int64_t budget = std::llround(units * unit);
    SCOPED_TRACE(::testing::Message() << "budget " << units << " units = " << budget << " bytes");
    spec.mutable_memory()->set_device_budget_bytes(budget);
    auto planned = planner::PlanJob(spec);
    ASSERT_TRUE(planned.ok()) << planned.status();
    const double peak = MaxPeak(planned->sim);
    EXPECT_LE(peak, budget) << planned->schedule.name;
    EXPECT_LE(peak, last_peak + 1e-6);
    last_peak = peak;
    chosen.insert(planned->schedule.name);
    std::printf("budget %.1f units (%lld bytes): %s, predicted peak %.0f bytes, step %.4f s\n",
                units, static_cast<long long>(budget), planned->schedule.name.c_str(), peak,
                planned->sim.makespan);
    ExpectRunAsPredicted(*planned, RunProcesses(spec, *planned, link), kBudgetSteps, reference,
                         budget);
  }
  EXPECT_GE(chosen.size(), 3u) << "tighter budgets should change the plan";
  EXPECT_TRUE(std::any_of(chosen.begin(), chosen.end(), [](const std::string& n) {
    return n.find("offload") != std::string::npos;
  })) << "the tightest budgets need an offload plan";
  // Below what every schedule and offload plan reaches: a clear refusal naming the field.
  spec.mutable_memory()->set_device_budget_bytes(std::llround(0.1 * unit));
  auto none = planner::PlanJob(spec);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("memory.device_budget_bytes"), std::string::npos)
      << none.status();
  EXPECT_NE(none.status().message().find("smallest achievable peak"), std::string::npos)
      << none.status();
}

// A slow link (k = 1.6: a copy each way takes 80% of F+B+W): the planner's full offload on 1F1B
// frees device copies with RELEASE actions. Real processes run that plan: reference losses, and
// every rank measures exactly the predicted peak, below the plan without offload.
TEST(OffloadProcessesTest, ReleasePlanOnASlowLinkTrainsExactlyAndMeasuresThePrediction) {
  constexpr int kP = 8, kM = 16, kReleaseSteps = 2;
  constexpr double kOneWay = 0.8;  // a copy each way over F+B+W: k = 1.6
  v1::JobSpec plain = testing::SmallJob("1f1b", kP, kM, kReleaseSteps);
  // Planned as if transfers were free, so the plan is compute-bound as the k above assumes (the
  // tiny model's transfers would otherwise leave room for any copy); memory does not depend on
  // the timing the runtime sees, only on the order.
  planner::PlannerOptions options;
  options.link_latency_s = 0;
  options.link_bytes_per_s = 1e18;
  auto base = planner::PlanJob(plain, options);
  ASSERT_TRUE(base.ok()) << base.status();
  double link = 0;
  for (const schedule::StageCost& c : base->costs.stages) {
    link = std::max(link, c.activation / (kOneWay * (c.f + c.b + c.w)));
  }
  v1::JobSpec spec = plain;
  spec.mutable_memory()->set_offload(v1::OFFLOAD_POLICY_FULL);
  spec.mutable_memory()->set_host_link_bytes_per_s(link);
  auto planned = planner::PlanJob(spec, options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  int releases = 0;
  for (const auto& list : planned->schedule.worker_actions) {
    for (const schedule::Action& a : list) releases += a.kind == schedule::ActionKind::kRelease;
  }
  ASSERT_GT(releases, 0) << planned->plan.explanation();
  EXPECT_LT(planned->sim.peak_memory[0], base->sim.peak_memory[0]);
  const std::vector<double> reference = testing::ReferenceLosses(spec);
  ExpectRunAsPredicted(*planned, RunProcesses(spec, *planned, link), kReleaseSteps, reference);
}

}  // namespace
}  // namespace pipetrain
