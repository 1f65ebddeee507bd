// Executor protocol checks on hand-written action lists: missing inputs, leftovers, lost peers
// device out-of-memory and an activation budget exceeded are clean errors that name the action
// and the step.
#include "worker/runtime/executor.h"

#include <gtest/gtest.h>

#include <memory>

#include "absl/time/clock.h"
#include "kernels/cpu/cpu_backend.h"
#include "schedule/schedule.h"
#include "tests/fakes/manual_clock.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"

namespace pipetrain::worker {
namespace {

using schedule::Action;
using schedule::ActionKind;

schedule::Schedule TwoWorkers(std::vector<Action> w0, std::vector<Action> w1) {
  schedule::Schedule s =
      schedule::MakeEmptySchedule("handmade", 2, 1, schedule::LoopPlacement(2, 1));
  s.worker_actions = {std::move(w0), std::move(w1)};
  return s;
}

struct Workers {
  explicit Workers(int p, int num_stages, int64_t budget = kernels::CountingAllocator::kUnlimited) {
    schedule::CostModel costs;
    costs.stages.assign(num_stages, schedule::StageCost{1e-4, 1e-4, 1e-4, -1, 1.0, 0.0});
    for (int r = 0; r < p; ++r) {
      kernels::CpuBackendOptions o;
      o.device_budget_bytes = budget;
      backends.push_back(std::make_unique<kernels::CpuBackend>(o));
      runners.push_back(std::make_unique<EmulatedStageRunner>(
          backends.back().get(), num_stages, EmulatedStageConfig{costs, 4096, 16}));
      raw.push_back(runners.back().get());
    }
  }
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<EmulatedStageRunner>> runners;
  std::vector<StageRunner*> raw;
};

const Action F0{ActionKind::kF, 0, 0}, F1{ActionKind::kF, 1, 0};
const Action BW0{ActionKind::kBW, 0, 0}, BW1{ActionKind::kBW, 1, 0};
const Action SA0{ActionKind::kSendAct, 0, 0}, RA1{ActionKind::kRecvAct, 1, 0};
const Action SG1{ActionKind::kSendGrad, 1, 0}, RG0{ActionKind::kRecvGrad, 0, 0};

TEST(Executor, RunsAHandWrittenTwoStagePipeline) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  Workers w(2, 2);
  FakeTransportHub hub(2);
  auto results = RunInProcess(s, w.raw, 3, &hub);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[0].size(), 3u);
  EXPECT_EQ((*results)[0][2].sent_bytes, 16 * 4);
  EXPECT_EQ((*results)[1][2].received_bytes, 16 * 4);
  EXPECT_EQ((*results)[0][0].peak_activation_bytes, 4096);
  // Timings are per action, in order, non-overlapping.
  const auto& t = (*results)[1][1].timings;
  ASSERT_EQ(t.size(), 4u);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i].start_ns, t[i - 1].end_ns);
}

// An action's CPU time is its thread's, not the wall clock's: a receive that waits 100 ms for a
// delayed message takes that wall time and next to no CPU; no action takes more CPU than wall
// time, and the step's actions take some.
TEST(Executor, CpuTimeOfAnActionLeavesOutItsWaits) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  Workers w(2, 2);
  FakeTransportHub hub(2);
  hub.set_delay(absl::Milliseconds(100));
  auto results = RunInProcess(s, w.raw, 1, &hub);
  ASSERT_TRUE(results.ok()) << results.status();
  const auto& recv = (*results)[1][0].timings[0];
  ASSERT_EQ(recv.action.kind, ActionKind::kRecvAct);
  EXPECT_GE(recv.end_ns - recv.start_ns, 90'000'000);
  EXPECT_LT(recv.cpu_ns, 20'000'000);
  int64_t cpu = 0;
  for (int r = 0; r < 2; ++r) {
    for (const ActionTiming& t : (*results)[r][0].timings) {
      EXPECT_GE(t.cpu_ns, 0);
      EXPECT_LE(t.cpu_ns, t.end_ns - t.start_ns + 1'000'000);  // clock granularity
      cpu += t.cpu_ns;
    }
  }
  EXPECT_GT(cpu, 0);
}

// Timings come from the clock the executor is given (one seam: common/clock.h). A clock that
// moves 1000 ns per read makes them exact: step start 0, then each action's start and end.
TEST(Executor, TimesActionsWithTheGivenClock) {
  schedule::Schedule s = schedule::MakeEmptySchedule("handmade", 1, 1, {0});
  s.worker_actions = {{F0, BW0}};
  Workers w(1, 1);
  FakeTransportHub hub(1);
  ManualClock clock(/*start_ns=*/5000, /*tick_ns=*/1000);
  ExecutorOptions options;
  options.clock = &clock;
  Executor executor(s, 0, w.raw[0], hub.endpoint(0), options);
  absl::StatusOr<StepResult> r = executor.RunStep(0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->timings.size(), 2u);
  EXPECT_EQ(r->timings[0].start_ns, 1000);
  EXPECT_EQ(r->timings[0].end_ns, 2000);
  EXPECT_EQ(r->timings[1].start_ns, 3000);
  EXPECT_EQ(r->timings[1].end_ns, 4000);
  EXPECT_EQ(r->duration_ns, 5000);
  // The allocator's own peak counts the activations and everything else it holds.
  EXPECT_GT(r->peak_activation_bytes, 0);
  EXPECT_GE(r->device_peak_bytes, r->peak_activation_bytes);
}

TEST(Executor, ForwardWithoutReceivedInputIsFailedPrecondition) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {F1, RA1, BW1, SG1});  // F1 before its RECV
  Workers w(2, 2);
  FakeTransportHub hub(2);
  auto results = RunInProcess(s, w.raw, 1, &hub);
  ASSERT_EQ(results.status().code(), absl::StatusCode::kFailedPrecondition) << results.status();
  EXPECT_NE(results.status().message().find("rank 1: step 0, action 1F0"), std::string::npos)
      << results.status();
  EXPECT_NE(results.status().message().find("input activation has not arrived"), std::string::npos);
}

TEST(Executor, UnsentTensorIsReportedAtEndOfStep) {
  // Worker 0 never sends; worker 1 never receives: a plan missing both transfers.
  schedule::Schedule s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  s.worker_actions[0] = {F0};
  s.worker_actions[1] = {};
  Workers w(2, 2);
  FakeTransportHub hub(2);
  Executor executor(s, 0, w.raw[0], hub.endpoint(0));
  auto r = executor.RunStep(0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("never consumed"), std::string::npos) << r.status();
}

TEST(Executor, LostPeerFailsTheStepWithinTheTimeout) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  Workers w(2, 2);
  FakeTransportHub hub(2);
  hub.Kill(1);
  Executor executor(s, 0, w.raw[0], hub.endpoint(0), ExecutorOptions{absl::Seconds(5)});
  const absl::Time start = absl::Now();
  auto r = executor.RunStep(0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("step 0, action 0SEND_F0: lost rank 1"), std::string::npos)
      << r.status();
}

TEST(Executor, SilentPeerTimesOutBounded) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  Workers w(2, 2);
  FakeTransportHub hub(2);
  Executor executor(s, 1, w.raw[1], hub.endpoint(1), ExecutorOptions{absl::Milliseconds(200)});
  auto r = executor.RunStep(0);  // rank 0 never runs
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST(Executor, DeviceOutOfMemoryNamesTheAction) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  Workers w(2, 2, /*budget=*/1000);  // an F stores 4096 bytes
  FakeTransportHub hub(2);
  auto results = RunInProcess(s, w.raw, 1, &hub);
  ASSERT_EQ(results.status().code(), absl::StatusCode::kResourceExhausted) << results.status();
  EXPECT_NE(results.status().message().find("action 0F0"), std::string::npos) << results.status();
}

// The job's activation budget (memory.device_budget_bytes): counted on the stashes the plan
// predicts, not on weights or transient buffers; at the budget a step runs, one byte under it
// fails at the action that went over.
TEST(Executor, ActivationBudgetFailsTheActionThatGoesOver) {
  auto s = TwoWorkers({F0, SA0, RG0, BW0}, {RA1, F1, BW1, SG1});
  {
    Workers w(2, 2);
    FakeTransportHub hub(2);
    ExecutorOptions o;
    o.activation_budget_bytes = 4096;  // one F's stash
    auto results = RunInProcess(s, w.raw, 2, &hub, o);
    ASSERT_TRUE(results.ok()) << results.status();
  }
  Workers w(2, 2);
  FakeTransportHub hub(2);
  ExecutorOptions o;
  o.activation_budget_bytes = 4095;
  auto results = RunInProcess(s, w.raw, 1, &hub, o);
  ASSERT_EQ(results.status().code(), absl::StatusCode::kResourceExhausted) << results.status();
  EXPECT_NE(results.status().message().find("action 0F0: memory.device_budget_bytes: rank 0 "
                                            "holds 4096 activation bytes, over the budget of 4095"),
            std::string::npos)
      << results.status();
}

}  // namespace
}  // namespace pipetrain::worker
