// Asynchronous OFFLOAD/RELOAD: the copy engine (ActivationCopier) and both stage runners.
//  - the copier moves bytes faithfully and frees the device copy only when released after the
//    copy completed;
//  - plans with OFFLOAD/RELOAD (inserted by a small test pass below, validated by the one
//    validator) train bitwise like the single-process reference, and the measured peak
//    activation bytes equal Simulate's prediction (an offloaded device copy is released at the
//    first compute end after its copy, with and without a link cap; RELOAD allocates at issue);
//  - with a bandwidth-capped copy thread, OFFLOAD/RELOAD return at once and compute waits for a
//    reload only when the copy is late.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "model/cost_model.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"
#include "tests/runtime/training_fixtures.h"
#include "worker/runtime/activation_copier.h"
#include "worker/runtime/emulated_stage_runner.h"
#include "worker/runtime/in_process_pipeline.h"
#include "worker/runtime/model_stage_runner.h"

namespace pipetrain::worker {
namespace {

using testing::Adam;
using testing::Data;
using testing::ExactByteCosts;
using testing::kMicrobatchSize;
using testing::MakeModelWorkers;
using testing::SmallModel;
using testing::Weights;

using schedule::Action;
using schedule::ActionKind;

// ---------------------------------------------------------------------------------------------
// Test pass: offload every stash whose backward is at least `min_gap` actions after its F on the
// same worker: OFFLOAD right after F, RELOAD `lead` actions before the backward (never before the
// OFFLOAD). The result must pass ValidateSchedule.
schedule::Schedule AddOffloads(const schedule::Schedule& in, int min_gap, int lead) {
  schedule::Schedule out = in;
  for (int w = 0; w < in.num_workers; ++w) {
    const std::vector<Action>& list = in.worker_actions[w];
    const int n = static_cast<int>(list.size());
    std::vector<std::vector<Action>> before(n + 1), after(n);
    for (int i = 0; i < n; ++i) {
      if (list[i].kind != ActionKind::kF) continue;
      int j = i + 1;
      while (j < n &&
             !((list[j].kind == ActionKind::kB || list[j].kind == ActionKind::kBW) &&
               list[j].stage == list[i].stage && list[j].microbatch == list[i].microbatch)) {
        ++j;
      }
      if (j >= n || j - i < min_gap) continue;
      after[i].push_back({ActionKind::kOffload, list[i].stage, list[i].microbatch});
      before[std::max(i + 1, j - lead)].push_back(
          {ActionKind::kReload, list[i].stage, list[i].microbatch});
    }
    std::vector<Action>& dst = out.worker_actions[w];
    dst.clear();
    for (int i = 0; i < n; ++i) {
      for (const Action& a : before[i]) dst.push_back(a);
      dst.push_back(list[i]);
      for (const Action& a : after[i]) dst.push_back(a);
    }
  }
  return out;
}

int CountKind(const schedule::Schedule& s, ActionKind kind) {
  int count = 0;
  for (const auto& list : s.worker_actions) {
    for (const Action& a : list) count += a.kind == kind;
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// The copy engine alone.

TEST(OffloadCopierTest, RoundTripKeepsBytesAndFreesDeviceWhenCopyCompletes) {
  kernels::CpuBackend backend;
  ActivationCopierOptions options;
  options.bandwidth_bytes_per_s = 40.0 * (1 << 20);  // 1 MiB takes 25 ms
  ActivationCopier copier(&backend, options);
  std::vector<float> values(1 << 18);  // 1 MiB
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  auto t = backend.FromHost({static_cast<int64_t>(values.size())}, values, "stash");
  ASSERT_TRUE(t.ok()) << t.status();
  kernels::Tensor empty;
  std::vector<kernels::Tensor*> slots = {&*t, &empty};
  const int64_t device_before = backend.device_allocator().current_bytes();

  auto off = copier.StartOffload(slots, "offload");
  ASSERT_TRUE(off.ok()) << off.status();
  // The slot already holds the host tensor; the device bytes are still held by the copy.
  EXPECT_EQ(t->location(), kernels::Location::kHost);
  EXPECT_EQ((*off)->bytes(), 1 << 20);
  EXPECT_FALSE((*off)->done()) << "a 25 ms copy finished at once";
  EXPECT_EQ(backend.device_allocator().current_bytes(), device_before);
  EXPECT_EQ(copier.stats().in_flight_device_bytes, 1 << 20);
  ASSERT_TRUE((*off)->Wait().ok());
  // Done, but the device copy is kept until the executor releases it (at a compute end).
  EXPECT_EQ(backend.device_allocator().current_bytes(), device_before);
  EXPECT_EQ((*off)->held_device_bytes(), 1 << 20);
  EXPECT_EQ(copier.ReleaseSource(**off), 1 << 20);
  EXPECT_EQ(backend.device_allocator().current_bytes(), device_before - (1 << 20));
  EXPECT_EQ(copier.stats().in_flight_device_bytes, 0);
  EXPECT_GE((*off)->end_ns() - (*off)->start_ns(), 20'000'000);

  auto rel = copier.StartReload(slots, "reload");
  ASSERT_TRUE(rel.ok()) << rel.status();
  // RELOAD allocates the device copy at once (that is when the bytes come back).
  EXPECT_EQ(t->location(), kernels::Location::kDevice);
  EXPECT_EQ(backend.device_allocator().current_bytes(), device_before);
  ASSERT_TRUE(copier.Drain().ok());
  EXPECT_TRUE((*rel)->done());
  EXPECT_EQ(backend.host_allocator().current_bytes(), 0);
  auto back = backend.ToVector(*t);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(back->data(), values.data(), values.size() * sizeof(float)), 0);
  EXPECT_TRUE(empty.empty());
}

TEST(OffloadCopierTest, ReloadBehindAnUnfinishedOffloadReadsTheCopiedBytes) {
  for (bool duplex : {true, false}) {
  SCOPED_TRACE(duplex ? "duplex" : "one copy thread");
  kernels::CpuBackend backend;
  ActivationCopierOptions options;
  options.bandwidth_bytes_per_s = 40.0 * (1 << 20);
  options.duplex = duplex;
  ActivationCopier copier(&backend, options);
  std::vector<float> values(1 << 16, 3.25f);
  auto t = backend.FromHost({static_cast<int64_t>(values.size())}, values, "stash");
  ASSERT_TRUE(t.ok());
  std::vector<kernels::Tensor*> slots = {&*t};
  auto off = copier.StartOffload(slots, "offload");
  ASSERT_TRUE(off.ok());
  // Duplex: its own thread, but it waits for the offload's ticket; one thread: FIFO.
  auto rel = copier.StartReload(slots, "reload", *off);
  ASSERT_TRUE(rel.ok());
  ASSERT_TRUE((*rel)->Wait().ok());
  EXPECT_TRUE((*off)->done());
  // On the link the reload follows the offload: it is delivered a whole copy time later.
  const int64_t copy_ns = static_cast<int64_t>((1 << 18) / options.bandwidth_bytes_per_s * 1e9);
  EXPECT_GE((*rel)->ready_ns(), (*off)->ready_ns() + copy_ns - 1);
  EXPECT_GE((*rel)->end_ns(), (*off)->end_ns() + copy_ns - 1);
  auto back = backend.ToVector(*t);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, values);
  copier.ReleaseSource(**off);
  }
}

TEST(OffloadCopierTest, DuplexRunsOffloadAndReloadAtOnce) {
  // Two 50 ms copies of different stashes in opposite directions overlap with duplex on.
  kernels::CpuBackend backend;
  ActivationCopierOptions options;
  options.bandwidth_bytes_per_s = 20.0 * (1 << 20);
  ActivationCopier copier(&backend, options);
  auto a = backend.Zeros({1 << 18}, "a");
  auto b = backend.Zeros({1 << 18}, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<kernels::Tensor*> sa = {&*a}, sb = {&*b};
  auto off_b = copier.StartOffload(sb, "b");
  ASSERT_TRUE(off_b.ok());
  ASSERT_TRUE(copier.Drain().ok());
  auto off_a = copier.StartOffload(sa, "a");
  auto rel_b = copier.StartReload(sb, "b", *off_b);
  ASSERT_TRUE(off_a.ok() && rel_b.ok());
  ASSERT_TRUE(copier.Drain().ok());
  EXPECT_LT((*rel_b)->start_ns(), (*off_a)->end_ns()) << "H2D waited for the D2H copy";
  copier.ReleaseSource(**off_a);
  copier.ReleaseSource(**off_b);
}

TEST(OffloadCopierTest, ReloadOverBudgetIsACleanErrorAndChangesNothing) {
  kernels::CpuBackend backend;
  ActivationCopier copier(&backend);
  auto t = backend.Zeros({1024}, "stash");
  ASSERT_TRUE(t.ok());
  std::vector<kernels::Tensor*> slots = {&*t};
  ASSERT_TRUE(copier.StartOffload(slots, "offload").ok());
  ASSERT_TRUE(copier.Drain().ok());
  backend.device_allocator().set_budget_bytes(backend.device_allocator().current_bytes() + 100);
  auto rel = copier.StartReload(slots, "reloaded activations of stage 0 microbatch 3");
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.status().code(), absl::StatusCode::kResourceExhausted) << rel.status();
  EXPECT_NE(rel.status().message().find("microbatch 3"), std::string::npos) << rel.status();
  EXPECT_EQ(t->location(), kernels::Location::kHost);
}

// ---------------------------------------------------------------------------------------------
// Emulated runner: measured peak equals Simulate's with OFFLOAD/RELOAD in the plan.

struct EmuCase {
  std::string schedule;
  int p;
  int m;
  double freed_by_b;
  double bandwidth;  // copy thread cap, bytes/s (0 = memcpy)
};
void PrintTo(const EmuCase& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " m=" << c.m << " bw=" << c.bandwidth;
}

// p emulated workers (each its own CPU backend), copy threads capped at `bandwidth` (0: memcpy).
struct EmulatedWorkers {
  EmulatedWorkers(int p, int num_stages, const schedule::CostModel& costs, double bytes_per_unit,
                  double bandwidth) {
    for (int r = 0; r < p; ++r) {
      backends.push_back(std::make_unique<kernels::CpuBackend>());
      EmulatedStageConfig config{costs, bytes_per_unit, 256};
      config.copy_bandwidth_bytes_per_s = bandwidth;
      runners.push_back(
          std::make_unique<EmulatedStageRunner>(backends.back().get(), num_stages, config));
      raw.push_back(runners.back().get());
    }
  }
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<EmulatedStageRunner>> runners;
  std::vector<StageRunner*> raw;
};

class OffloadEmulatedTest : public ::testing::TestWithParam<EmuCase> {};

TEST_P(OffloadEmulatedTest, MeasuredPeakEqualsSimulatedPeak) {
  const EmuCase& c = GetParam();
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  // With a capped link the copies (<= 0.5 ms) must end well inside the next compute action
  // (4 ms) on a loaded machine, as the simulator predicts; release happens at compute ends.
  spec.f = spec.b = spec.w = c.bandwidth > 0 ? 4e-3 : 1e-3;
  auto compute = schedule::Generate(c.schedule, spec);
  if (!compute.ok() && compute.status().message().find("unknown schedule") != std::string::npos) {
    GTEST_SKIP() << c.schedule << " is not registered in this build";
  }
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto transfers = schedule::AddTransfers(*compute);
  ASSERT_TRUE(transfers.ok()) << transfers.status();
  const schedule::Schedule plan = AddOffloads(*transfers, /*min_gap=*/4, /*lead=*/2);
  ASSERT_GT(CountKind(plan, ActionKind::kOffload), 0);
  ASSERT_TRUE(schedule::ValidateSchedule(plan).ok()) << schedule::ValidateSchedule(plan);
  schedule::CostModel costs = schedule::CostModelFor(spec, plan.ChunksPerWorker());
  for (auto& stage : costs.stages) stage.freed_by_b = stage.activation * c.freed_by_b;
  constexpr double kBytesPerUnit = 1 << 20;
  costs.bytes_per_unit = kBytesPerUnit;
  costs.d2h_bytes_per_s = costs.h2d_bytes_per_s = c.bandwidth;
  auto sim = schedule::Simulate(plan, costs);
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto sim_plain = schedule::Simulate(*transfers, costs);
  ASSERT_TRUE(sim_plain.ok());

  EmulatedWorkers workers(c.p, plan.num_stages, costs, kBytesPerUnit, c.bandwidth);
  auto& backends = workers.backends;
  auto& runners = workers.runners;
  auto& raw = workers.raw;
  FakeTransportHub hub(c.p);
  auto results = RunInProcess(plan, raw, /*steps=*/2, &hub);
  ASSERT_TRUE(results.ok()) << results.status();
  bool lower_somewhere = false;
  for (int r = 0; r < c.p; ++r) {
    for (const StepResult& step : (*results)[r]) {
      EXPECT_EQ(step.peak_activation_bytes, std::llround(sim->peak_memory[r] * kBytesPerUnit))
          << "worker " << r << " step " << step.step;
      EXPECT_EQ(step.timings.size(), plan.worker_actions[r].size());
    }
    lower_somewhere |= sim->peak_memory[r] < sim_plain->peak_memory[r];
    EXPECT_EQ(runners[r]->activation_bytes(), 0) << "worker " << r;
    EXPECT_EQ(backends[r]->host_allocator().current_bytes(), 0) << "worker " << r;
    EXPECT_EQ(runners[r]->copier_stats().in_flight_device_bytes, 0);
    EXPECT_EQ(runners[r]->copier_stats().offloaded_bytes,
              runners[r]->copier_stats().reloaded_bytes);
  }
  EXPECT_TRUE(lower_somewhere) << "offloading lowered no worker's peak";
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, OffloadEmulatedTest,
    ::testing::Values(EmuCase{"1f1b", 4, 8, 0, 0}, EmuCase{"1f1b", 4, 8, 0.5, 0},
                      EmuCase{"gpipe", 4, 8, 0, 2e9}, EmuCase{"zb-h1", 4, 8, 0.25, 0},
                      EmuCase{"interleaved-1f1b", 2, 4, 0, 0}, EmuCase{"v-half", 4, 8, 0, 0},
                      EmuCase{"zb-v", 4, 8, 0.5, 1e9}),
    [](const ::testing::TestParamInfo<EmuCase>& info) {
      std::string n = info.param.schedule + "_p" + std::to_string(info.param.p) + "_m" +
                      std::to_string(info.param.m) + (info.param.freed_by_b > 0 ? "_bfrees" : "") +
                      (info.param.bandwidth > 0 ? "_capped" : "");
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

// The offload pass's own plans on 1F1B, run by the emulated runtime. k = 1 (a copy each way
// takes half of F+B+W, 6 ms): each warm-up copy outlasts the next forward (4 ms), so the plan
// makes the worker wait for it at that compute's end, and the runtime executes the same wait.
// k = 1.6 (9.6 ms each way, longer than the backward after the next forward): the plan frees the
// device copies with RELEASE actions where the copies are booked to be done. Either way the
// measured peak equals the simulated one, below the plan without offload.
TEST(OffloadEmulatedTest, PassPlansWithWaitsAndReleasesMeasureTheSimulatedPeak) {
  for (const double k : {1.0, 1.6}) {
    SCOPED_TRACE(::testing::Message() << "k = " << k);
    schedule::PipelineSpec spec;
    spec.num_workers = 8;
    spec.num_microbatches = 16;
    spec.f = spec.b = spec.w = 4e-3;
    auto compute = schedule::Generate("1f1b", spec);
    ASSERT_TRUE(compute.ok()) << compute.status();
    constexpr double kBytesPerUnit = 1 << 20;
    schedule::CostModel costs = schedule::CostModelFor(spec, 1);
    costs.bytes_per_unit = kBytesPerUnit;
    const double bandwidth = kBytesPerUnit / (k / 2 * (spec.f + spec.b + spec.w));
    costs.d2h_bytes_per_s = costs.h2d_bytes_per_s = bandwidth;
    schedule::OffloadOptions options;
    options.mode = schedule::OffloadMode::kFull;
    auto offload = schedule::AddOffload(*compute, costs, options);
    ASSERT_TRUE(offload.ok()) << offload.status();
    ASSERT_GT(offload->offloaded, 0);
    EXPECT_EQ(CountKind(offload->schedule, ActionKind::kRelease) > 0, k > 1.5);
    auto plan = schedule::AddTransfers(offload->schedule);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto sim = schedule::Simulate(*plan, costs);
    ASSERT_TRUE(sim.ok()) << sim.status();
    auto sim_plain = schedule::Simulate(*compute, costs);
    ASSERT_TRUE(sim_plain.ok());
    EXPECT_LT(sim->peak_memory[0], sim_plain->peak_memory[0]);

    EmulatedWorkers workers(spec.num_workers, plan->num_stages, costs, kBytesPerUnit, bandwidth);
    auto& runners = workers.runners;
    auto& raw = workers.raw;
    FakeTransportHub hub(spec.num_workers);
    auto results = RunInProcess(*plan, raw, /*steps=*/2, &hub);
    ASSERT_TRUE(results.ok()) << results.status();
    for (int r = 0; r < spec.num_workers; ++r) {
      for (const StepResult& step : (*results)[r]) {
        EXPECT_EQ(step.peak_activation_bytes, std::llround(sim->peak_memory[r] * kBytesPerUnit))
            << "worker " << r << " step " << step.step;
      }
      EXPECT_EQ(runners[r]->activation_bytes(), 0) << "worker " << r;
      EXPECT_EQ(runners[r]->copier_stats().offloaded_bytes,
                runners[r]->copier_stats().reloaded_bytes);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Timing: OFFLOAD/RELOAD return at once; BW waits only for a late reload.

struct Timed {
  std::vector<ActionTiming> timings;
  int64_t waits = 0;
  int64_t wait_ns = 0;
};

// One worker, one stage, 6 microbatches; f = b = w = 60 ms; each copy takes 100 ms. The margins
// (50 ms) are wide because the test machine is shared and loaded.
constexpr int64_t kComputeMs = 60;
constexpr int64_t kCopyMs = 100;
constexpr int64_t kSlackMs = 50;

Timed RunOneWorker(const std::vector<std::string>& actions) {
  schedule::Schedule plan = schedule::MakeEmptySchedule("hand", 1, 6, {0});
  for (const std::string& text : actions) {
    auto a = schedule::ParseAction(text);
    EXPECT_TRUE(a.ok()) << text;
    plan.worker_actions[0].push_back(*a);
  }
  EXPECT_TRUE(schedule::ValidateSchedule(plan).ok()) << schedule::ValidateSchedule(plan);
  schedule::CostModel costs;
  schedule::StageCost sc;
  sc.f = sc.b = sc.w = kComputeMs / 1e3;
  costs.stages = {sc};
  constexpr double kBytesPerUnit = 4 << 20;
  kernels::CpuBackend backend;
  EmulatedStageConfig config{costs, kBytesPerUnit, 256};
  config.copy_bandwidth_bytes_per_s = kBytesPerUnit / (kCopyMs / 1e3);
  EmulatedStageRunner runner(&backend, 1, config);
  FakeTransportHub hub(1);
  auto results = RunInProcess(plan, {&runner}, /*steps=*/1, &hub);
  EXPECT_TRUE(results.ok()) << results.status();
  Timed out;
  if (results.ok()) out.timings = (*results)[0][0].timings;
  out.waits = runner.reload_waits();
  out.wait_ns = runner.reload_wait_ns();
  for (const ActionTiming& a : out.timings) {
    std::cout << schedule::ToString(a.action) << " " << (a.end_ns - a.start_ns) / 1e6 << " ms  ";
  }
  std::cout << "\nreload waits " << out.waits << ", " << out.wait_ns / 1e6 << " ms\n";
  return out;
}

int64_t DurationMs(const Timed& t, const std::string& action) {
  for (const ActionTiming& a : t.timings) {
    if (schedule::ToString(a.action) == action) return (a.end_ns - a.start_ns) / 1'000'000;
  }
  ADD_FAILURE() << action << " not in the timings";
  return -1;
}

TEST(OffloadTimingTest, EarlyReloadIsHiddenBehindCompute) {
  // Copies run during F1..F3 (offload 60..160 ms, reload 160..260 ms); BW0 starts at ~360 ms.
  const Timed t = RunOneWorker({"0F0", "0OFFLOAD0", "0RELOAD0", "0F1", "0F2", "0F3", "0F4", "0F5",
                                "0B0", "0B1", "0B2", "0B3", "0B4", "0B5"});
  ASSERT_FALSE(t.timings.empty());
  // Both return long before their copy could have finished.
  EXPECT_LT(DurationMs(t, "0OFFLOAD0"), kCopyMs / 2) << "OFFLOAD did not return at once";
  EXPECT_LT(DurationMs(t, "0RELOAD0"), kCopyMs / 2) << "RELOAD did not return at once";
  EXPECT_EQ(t.waits, 0) << "BW0 waited " << t.wait_ns / 1e6 << " ms for a reload that was early";
  EXPECT_LT(DurationMs(t, "0B0"), 2 * kComputeMs + kSlackMs);
}

TEST(OffloadTimingTest, LateReloadMakesOnlyTheBackwardWait) {
  // OFFLOAD and RELOAD issued just before BW0: its compute waits for both copies (~200 ms).
  const Timed t = RunOneWorker({"0F0", "0F1", "0F2", "0F3", "0F4", "0F5", "0OFFLOAD0", "0RELOAD0",
                                "0B0", "0B1", "0B2", "0B3", "0B4", "0B5"});
  ASSERT_FALSE(t.timings.empty());
  EXPECT_LT(DurationMs(t, "0OFFLOAD0"), kCopyMs / 2);
  EXPECT_LT(DurationMs(t, "0RELOAD0"), kCopyMs / 2);
  EXPECT_EQ(t.waits, 1);
  EXPECT_GE(t.wait_ns, (2 * kCopyMs - kSlackMs) * 1'000'000);
  EXPECT_GE(DurationMs(t, "0B0"), 2 * kComputeMs + 2 * kCopyMs - kSlackMs);
  EXPECT_LT(DurationMs(t, "0B1"), 2 * kComputeMs + kSlackMs)
      << "a stash that was never offloaded waited";
}

TEST(OffloadTimingTest, BackwardOnAnOffloadedStashIsAnError) {
  schedule::CostModel costs;
  costs.stages = {schedule::StageCost{}};
  costs.stages[0].f = costs.stages[0].b = costs.stages[0].w = 0;
  kernels::CpuBackend backend;
  EmulatedStageRunner runner(&backend, 1, EmulatedStageConfig{costs, 1024, 16});
  ASSERT_TRUE(runner.BeginStep(0).ok());
  ASSERT_TRUE(runner.Forward(0, 0, kernels::Tensor()).ok());
  ASSERT_TRUE(runner.Offload(0, 0).ok());
  EXPECT_EQ(runner.Offload(0, 0).code(), absl::StatusCode::kFailedPrecondition);
  auto b = runner.Backward(0, 0, kernels::Tensor());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("offloaded and were not reloaded"), std::string::npos)
      << b.status();
  ASSERT_TRUE(runner.Reload(0, 0).ok());
  EXPECT_EQ(runner.Reload(0, 0).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(runner.Backward(0, 0, kernels::Tensor()).ok());
  ASSERT_TRUE(runner.EndStep(std::nullopt).ok());
}

// ---------------------------------------------------------------------------------------------
// Real GPT chunks: training with offload is bitwise the reference; peak equals Simulate's.

constexpr int kSteps = 3;

struct ModelCase {
  std::string schedule;
  int p;
  int m;
  double bandwidth;
};
void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.schedule << " p=" << c.p << " m=" << c.m << " bw=" << c.bandwidth;
}

class OffloadTrainingTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(OffloadTrainingTest, BitwiseEqualToReferenceAndPeakEqualsSimulate) {
  const ModelCase& c = GetParam();
  schedule::PipelineSpec spec;
  spec.num_workers = c.p;
  spec.num_microbatches = c.m;
  auto compute = schedule::Generate(c.schedule, spec);
  if (!compute.ok() && compute.status().message().find("unknown schedule") != std::string::npos) {
    GTEST_SKIP() << c.schedule << " is not registered in this build";
  }
  ASSERT_TRUE(compute.ok()) << compute.status();
  auto transfers = schedule::AddTransfers(*compute);
  ASSERT_TRUE(transfers.ok()) << transfers.status();
  const schedule::Schedule plan = AddOffloads(*transfers, /*min_gap=*/3, /*lead=*/1);
  ASSERT_GT(CountKind(plan, ActionKind::kOffload), 0);
  ASSERT_TRUE(schedule::ValidateSchedule(plan).ok()) << schedule::ValidateSchedule(plan);
  const model::GptConfig config = SmallModel(plan.num_stages);

  auto costs = ExactByteCosts(plan, config);
  ASSERT_TRUE(costs.ok()) << costs.status();
  auto sim = schedule::Simulate(plan, *costs);
  ASSERT_TRUE(sim.ok()) << sim.status();

  auto workers = MakeModelWorkers(plan, config, c.m, c.bandwidth);
  ASSERT_TRUE(workers.ok()) << workers.status();
  std::vector<std::unique_ptr<kernels::CpuBackend>>& backends = workers->backends;
  std::vector<std::unique_ptr<ModelStageRunner>>& runners = workers->runners;
  std::vector<StageRunner*>& raw = workers->raw;
  FakeTransportHub hub(c.p);
  auto results = RunInProcess(plan, raw, kSteps, &hub);
  ASSERT_TRUE(results.ok()) << results.status();

  // The reference: the whole model in one chunk, microbatches in order, fused backward.
  kernels::CpuBackend ref_backend;
  auto whole = model::GptChunk::Create(&ref_backend, config, model::WholeModel(config));
  ASSERT_TRUE(whole.ok());
  auto data = Data(config);
  const int loss_worker = plan.WorkerOf(plan.num_stages - 1);
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE((*whole)->ZeroGrad().ok());
    double loss = 0;
    for (int mb = 0; mb < c.m; ++mb) {
      MicrobatchData d = *data(step, mb);
      model::ForwardInput in;
      in.tokens = d.tokens;
      in.targets = d.targets;
      in.loss_scale = 1.0f / c.m;
      auto out = (*whole)->Forward(mb, std::move(in));
      ASSERT_TRUE(out.ok());
      loss += out->loss / c.m;
      ASSERT_TRUE((*whole)->Backward(mb, kernels::Tensor()).ok());
    }
    ASSERT_TRUE((*whole)->OptimizerStep(Adam(), step + 1).ok());
    ASSERT_TRUE((*results)[loss_worker][step].loss.has_value());
    EXPECT_EQ(*(*results)[loss_worker][step].loss, loss) << "step " << step;
  }
  const auto ref_weights = Weights(ref_backend, **whole);
  std::vector<std::vector<float>> weights;
  for (int s = 0; s < plan.num_stages; ++s) {
    const int r = plan.WorkerOf(s);
    auto w = Weights(*backends[r], *runners[r]->chunk(s));
    weights.insert(weights.end(), w.begin(), w.end());
  }
  ASSERT_EQ(weights.size(), ref_weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_EQ(weights[i].size(), ref_weights[i].size());
    EXPECT_EQ(
        std::memcmp(weights[i].data(), ref_weights[i].data(), weights[i].size() * sizeof(float)), 0)
        << "parameter " << i << " differs";
  }
  int64_t offloaded = 0;
  for (int r = 0; r < c.p; ++r) {
    for (const StepResult& step : (*results)[r]) {
      EXPECT_EQ(step.peak_activation_bytes, std::llround(sim->peak_memory[r]))
          << "worker " << r << " step " << step.step;
      offloaded += step.offloaded_bytes;
    }
    EXPECT_EQ(backends[r]->host_allocator().current_bytes(), 0) << "worker " << r;
  }
  EXPECT_GT(offloaded, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, OffloadTrainingTest,
    ::testing::Values(ModelCase{"1f1b", 2, 4, 0}, ModelCase{"gpipe", 2, 4, 0},
                      ModelCase{"zb-h1", 4, 6, 0}, ModelCase{"interleaved-1f1b", 2, 4, 0},
                      ModelCase{"v-half", 4, 8, 0}, ModelCase{"1f1b", 4, 6, 5e7}),
    [](const ::testing::TestParamInfo<ModelCase>& info) {
      std::string n = info.param.schedule + "_p" + std::to_string(info.param.p) + "_m" +
                      std::to_string(info.param.m) + (info.param.bandwidth > 0 ? "_capped" : "");
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace pipetrain::worker
