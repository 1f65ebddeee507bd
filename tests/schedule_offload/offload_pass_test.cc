// The offload passes (full / half / selective) and the offload ratio k, in simulation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "schedule/auto_planner.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/offload_ratio.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

// Unit costs per worker share (layers per worker fixed as p grows); a host link such that the
// offload ratio k = a chunk's copy time out and back / its f + b + w is `k` (each way k/2).
CostModel WithLink(const PipelineSpec& spec, int v, double k) {
  CostModel c = CostModelFor(spec, v);
  const double chunk_compute = (spec.f + spec.b + spec.w) / v, chunk_units = 1.0 / v;
  c.d2h_bytes_per_s = c.h2d_bytes_per_s = chunk_units / (k / 2 * chunk_compute);
  return c;
}

// The flat-in-p setting: `name` on p workers, m = 2p, unit costs per worker share, link at k.
struct Scaled {
  Schedule schedule;
  CostModel costs;
  SimResult base;  // without offload
};
Scaled ScaledJob(const std::string& name, int p, double k, int group_size = 0) {
  PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = 2 * p;
  spec.group_size = group_size;
  absl::StatusOr<Schedule> s = Generate(name, spec);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  Scaled out{*s, WithLink(spec, s->ChunksPerWorker(), k), {}};
  absl::StatusOr<SimResult> base = Simulate(out.schedule, out.costs);
  EXPECT_TRUE(base.ok()) << base.status();
  if (base.ok()) out.base = *base;
  return out;
}

TEST(OffloadRatioTest, PaperFormulaAndPresets) {
  auto a100 = FindDevicePreset("A100");
  auto h100 = FindDevicePreset("h100");
  auto h200 = FindDevicePreset("h200");
  ASSERT_TRUE(a100.ok() && h100.ok() && h200.ok());
  // k = 10 / (3 (6h + s)) * FLOP/s / bytes/s; h = s = 4096: A100 1.705, H100 2.436 (the
  // authors' offload_time = k/2, the one-way share: 0.853 and 1.218).
  EXPECT_NEAR(*OffloadRatio(4096, 4096, *a100), 10.0 / (3 * 28672.0) * 220e12 / 15e9, 1e-12);
  EXPECT_NEAR(*OffloadRatio(4096, 4096, *a100) / 2, 0.853, 5e-4);
  EXPECT_NEAR(*OffloadRatio(4096, 4096, *h100) / 2, 1.218, 5e-4);
  EXPECT_DOUBLE_EQ(*OffloadRatio(4096, 4096, *h200), *OffloadRatio(4096, 4096, *h100));
  // Measured bandwidth overrides the preset; each direction moves half the round trip's bytes.
  const DeviceLink measured = WithMeasuredLink(*a100, 30e9, 25e9);
  EXPECT_NEAR(*OffloadRatio(4096, 4096, measured),
              *OffloadRatio(4096, 4096, *a100) * 15 * (0.5 / 30 + 0.5 / 25), 1e-12);
  EXPECT_DOUBLE_EQ(WithMeasuredLink(*a100, 0, 0).d2h_bytes_per_s, 15e9);
  auto bad = FindDevicePreset("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a100, h100, h200"), std::string::npos);
  EXPECT_FALSE(OffloadRatio(0, 4096, *a100).ok());
}

TEST(OffloadRatioTest, FromCostModel) {
  PipelineSpec spec;
  spec.num_workers = 4;
  const CostModel c = WithLink(spec, 2, 0.75);
  EXPECT_NEAR(MaxOffloadRatio(c), 0.75, 1e-12);
  // The spec's k gives the same cost model: each way k/2 of a chunk's f + b + w.
  spec.offload_ratio = 0.75;
  const CostModel from_spec = CostModelFor(spec, 2);
  EXPECT_NEAR(MaxOffloadRatio(from_spec), 0.75, 1e-12);
  EXPECT_NEAR(from_spec.OffloadTime(0), 0.375 * 1.5, 1e-12);
  EXPECT_NEAR(from_spec.ReloadTime(0), 0.375 * 1.5, 1e-12);
}

TEST(GroupedInterleavedTest, ValidForGroupSizesFromHalfPToM) {
  for (int p : {2, 3, 4, 5, 8}) {
    for (int v : {1, 2, 3}) {
      for (int g = (p + 1) / 2; g <= 2 * p; ++g) {
        PipelineSpec spec;
        spec.num_workers = p;
        spec.num_microbatches = 2 * g;
        spec.chunks_per_worker = v;
        spec.group_size = g;
        auto s = Generate("interleaved-group", spec);
        ASSERT_TRUE(s.ok()) << "p=" << p << " v=" << v << " g=" << g << ": " << s.status();
      }
    }
  }
  // g = p is Megatron's interleaved order.
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  auto a = Generate("interleaved-group", spec);
  auto b = Generate("interleaved-1f1b", spec);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->worker_actions, b->worker_actions);
  spec.group_size = 1;
  auto bad = Generate("interleaved-group", spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("group_size"), std::string::npos) << bad.status();
}

// Full offload keeps the peak per worker flat as p grows (layers per worker fixed), with the
// bubble within 2 percentage points of the same schedule's: interleaved orders up to k = 2/3
// (InterleavedWarmupLimitsFlatOffloadToTwoThirds says why not beyond), 1F1B up to k = 1.9
// (the next test).
TEST(OffloadPassTest, FullOffloadPeakFlatInPAndBubbleWithin2Points) {
  for (const char* name : {"interleaved-1f1b", "interleaved-group"})
  for (double k : {0.5, 0.65}) {
    double first_peak = -1;
    for (int p : {4, 8, 16, 32}) {
      const Scaled job =
          ScaledJob(name, p, k, name == std::string("interleaved-group") ? p / 2 : 0);
      const SimResult* base = &job.base;
      OffloadOptions o;
      o.mode = OffloadMode::kFull;
      auto plan = AddOffload(job.schedule, job.costs, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_TRUE(ValidateSchedule(plan->schedule).ok());
      SCOPED_TRACE(::testing::Message() << name << " k=" << k << " p=" << p);
      EXPECT_GT(plan->offloaded, plan->stashes * 0.85);
      EXPECT_LT(plan->sim.bubble_ratio - base->bubble_ratio, 0.02);
      if (first_peak < 0) first_peak = MaxPeak(plan->sim);
      EXPECT_NEAR(MaxPeak(plan->sim), first_peak, 1e-9) << "base peak " << MaxPeak(*base);
      EXPECT_LT(MaxPeak(plan->sim), MaxPeak(*base) / 3);
    }
  }
}

// Past k = 4/3 a steady-state copy (k/2 of F+B+W each way) outlasts the backward after the next
// forward, so waiting for it at that compute's end would stall every period. RELEASE actions
// free each device copy where its copy is booked to be done instead (PipeOffload's SEND_END):
// 1F1B's full offload stays flat in p up to k = 1.9, a copy each way taking 95% of F+B+W, at no
// step-time cost. At k = 2 the link is busy all the time each way: memory still flat, but the
// step grows by a constant (+3 time units, 1% at p = 32, 4% at p = 8), past the pass's default
// 1% slowdown, so it keeps the activations there.
TEST(OffloadPassTest, ReleaseActionsKeep1F1BFlatUpToKNearTwo) {
  for (double k : {1.6, 1.9}) {
    double first_peak = -1;
    for (int p : {8, 16, 32}) {
      const Scaled job = ScaledJob("1f1b", p, k);
      OffloadOptions o;
      o.mode = OffloadMode::kFull;
      auto plan = AddOffload(job.schedule, job.costs, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      SCOPED_TRACE(::testing::Message() << "k=" << k << " p=" << p);
      EXPECT_TRUE(ValidateSchedule(plan->schedule).ok());
      int releases = 0;
      for (const auto& list : plan->schedule.worker_actions) {
        for (const Action& a : list) releases += a.kind == ActionKind::kRelease;
      }
      EXPECT_GT(releases, plan->offloaded / 2);
      EXPECT_LE(plan->sim.makespan, job.base.makespan * (1 + o.max_slowdown) + 1e-9);
      EXPECT_LT(plan->sim.bubble_ratio - job.base.bubble_ratio, 0.01);
      if (first_peak < 0) first_peak = MaxPeak(plan->sim);
      EXPECT_NEAR(MaxPeak(plan->sim), first_peak, 1e-9) << "base peak " << MaxPeak(job.base);
      EXPECT_LE(MaxPeak(plan->sim), 5.0);
    }
  }
  // k = 2: flat memory only by giving up step time.
  OffloadOptions o;
  o.mode = OffloadMode::kFull;
  o.max_slowdown = 0.05;
  for (int p : {8, 32}) {
    const Scaled job = ScaledJob("1f1b", p, 2.0);
    auto plan = AddOffload(job.schedule, job.costs, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_DOUBLE_EQ(MaxPeak(plan->sim), 6.0) << "p=" << p;
    EXPECT_NEAR(plan->sim.makespan - job.base.makespan, 3.0, 1e-9) << "p=" << p;
  }
}

// Why interleaved orders stop at k = 2/3: worker 0 opens with 2p chunk forwards back to back
// (F = 1/2 each: chunk 0 of p microbatches, then chunk 1 as they come back round), a stash every
// 1/2, twice the steady rate; one D2H engine moves one in (k/2) x 1.5, slower than a forward past
// k = 2/3, so the burst outruns the link and what stays resident grows with p. Postponing those
// forwards (the waiting booking) is not free here as it is on 1F1B: at k = 1, p = 32 it costs 3%
// of the step and still peaks at 5.5 units. A base with a slower warm-up is needed there.
TEST(OffloadPassTest, InterleavedWarmupLimitsFlatOffloadToTwoThirds) {
  std::vector<double> peaks;
  for (int p : {4, 8, 16, 32}) {
    const Scaled job = ScaledJob("interleaved-1f1b", p, 0.8);
    const Schedule* s = &job.schedule;
    const CostModel& c = job.costs;
    const SimResult* base = &job.base;
    int burst = 0;  // worker 0's forwards in [0, p): back to back
    for (const TimedAction& t : base->timeline) {
      if (t.worker == 0 && t.action.kind == ActionKind::kF && t.end <= p + 1e-9) ++burst;
    }
    EXPECT_EQ(burst, 2 * p);
    EXPECT_GT(c.OffloadTime(0), c.stages[0].f);  // each copy outlasts the next forward
    OffloadOptions o;
    o.mode = OffloadMode::kFull;
    auto plan = AddOffload(*s, c, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_LE(MaxPeak(plan->sim), MaxPeak(*base));
    peaks.push_back(MaxPeak(plan->sim));
  }
  EXPECT_GT(peaks.back(), peaks.front() + 8) << "the peak grows with p";
}

// Acceptance, k <= 1: beyond k = 2/3 a warm-up copy (k/2 of F+B+W each way) outlasts the next
// forward. Waiting for it there (the IR's wait at a compute end) postpones the next forward,
// PipeOffload's "postpone warm-up forwards": on 1F1B the warm-up forwards have the slack, so the
// peak stays flat in p at no step-time cost up to k = 4/3 (the first backward comes 2p-1
// forwards' time after the first forward, and the p stashes made by then need p copies of
// k/2 x 3 each). Strict booking, which drops copies that would make the worker wait, keeps
// p-proportional peaks there.
TEST(OffloadPassTest, WaitingForWarmupCopiesKeeps1F1BFlatUpToKOne) {
  for (double k : {0.5, 1.0, 1.3}) {
    double first_peak = -1;
    for (int p : {4, 8, 16, 32}) {
      const Scaled job = ScaledJob("1f1b", p, k);
      const Schedule* s = &job.schedule;
      const CostModel& c = job.costs;
      const SimResult* base = &job.base;
      OffloadOptions o;
      o.mode = OffloadMode::kFull;
      auto plan = AddOffload(*s, c, o);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_TRUE(ValidateSchedule(plan->schedule).ok());
      SCOPED_TRACE(::testing::Message() << "k=" << k << " p=" << p);
      EXPECT_LE(plan->sim.makespan, base->makespan * (1 + o.max_slowdown) + 1e-9);
      EXPECT_LT(plan->sim.bubble_ratio - base->bubble_ratio, 0.02);
      if (first_peak < 0) first_peak = MaxPeak(plan->sim);
      EXPECT_NEAR(MaxPeak(plan->sim), first_peak, 1e-9) << "base peak " << MaxPeak(*base);
      EXPECT_DOUBLE_EQ(MaxPeak(plan->sim), 3.0);  // F + BW in flight + one copy being moved

      // The same stashes with strict booking: warm-up copies dropped, the peak grows with p.
      auto cands = OffloadCandidates(*s, c, o);
      ASSERT_TRUE(cands.ok());
      std::vector<OffloadCandidate> all;
      for (const auto& per : *cands) {
        for (const OffloadCandidate& x : per) {
          if (x.eligible) all.push_back(x);
        }
      }
      auto strict = InsertOffloads(*s, c, all, o);
      ASSERT_TRUE(strict.ok());
      if (k > 2.0 / 3 && p >= 8) {
        EXPECT_GT(MaxPeak(strict->sim), MaxPeak(plan->sim) + p / 4.0);
      }
    }
  }
}

TEST(OffloadPassTest, HalfOffloadsAboutHalfAndLowersThePeak) {
  PipelineSpec spec;
  spec.num_workers = 8;
  spec.num_microbatches = 16;
  auto s = Generate("interleaved-1f1b", spec);
  ASSERT_TRUE(s.ok());
  const CostModel c = WithLink(spec, 2, 0.5);
  OffloadOptions o;
  o.mode = OffloadMode::kHalf;
  auto half = AddOffload(*s, c, o);
  o.mode = OffloadMode::kFull;
  auto full = AddOffload(*s, c, o);
  auto base = Simulate(*s, c);
  ASSERT_TRUE(half.ok() && full.ok() && base.ok());
  EXPECT_LE(half->offloaded, half->stashes / 2 + s->num_workers);
  EXPECT_GT(half->offloaded, half->stashes / 4);
  EXPECT_LT(MaxPeak(half->sim), MaxPeak(*base));
  EXPECT_LE(MaxPeak(full->sim), MaxPeak(half->sim));
  EXPECT_LT(half->sim.bubble_ratio - base->bubble_ratio, 0.02);
}

TEST(OffloadPassTest, VScheduleOffloadKeepsItsBubble) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  auto s = Generate("v-half", spec);
  ASSERT_TRUE(s.ok());
  const CostModel c = WithLink(spec, 2, 0.5);
  OffloadOptions o;
  auto plan = AddOffload(*s, c, o);
  auto base = Simulate(*s, c);
  ASSERT_TRUE(plan.ok() && base.ok()) << plan.status();
  EXPECT_GT(plan->offloaded, 0);
  EXPECT_LE(MaxPeak(plan->sim), MaxPeak(*base));
  EXPECT_LT(plan->sim.bubble_ratio - base->bubble_ratio, 0.02);
}

// Selective offload: peak falls better than linearly in the offloaded fraction.
// The partial modes pick stashes greedily by re-simulation (where the peak is now), so peak
// memory falls faster than linearly in the offloaded fraction over the whole curve.
TEST(OffloadPassTest, SelectiveCurveIsBelowTheLineEverywhere) {
  PipelineSpec spec;
  spec.num_workers = 8;
  spec.num_microbatches = 16;
  auto s = Generate("interleaved-1f1b", spec);
  ASSERT_TRUE(s.ok());
  const CostModel c = WithLink(spec, 2, 0.5);
  std::vector<double> peaks, offloaded;
  for (int i = 0; i <= 16; ++i) {
    OffloadOptions o;
    o.mode = OffloadMode::kFraction;
    o.fraction = i / 16.0;
    auto plan = AddOffload(*s, c, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    peaks.push_back(MaxPeak(plan->sim));
    offloaded.push_back(static_cast<double>(plan->offloaded) / plan->stashes);
    std::printf("fraction %.4f offloaded %.3f peak %.3f\n", o.fraction, offloaded.back(),
                peaks.back());
  }
  // Unit-cost chunks hold 0.5 units: exact multiples. 11.5 -> 1.5 units.
  EXPECT_DOUBLE_EQ(peaks.front(), 11.5);
  EXPECT_DOUBLE_EQ(peaks.back(), 1.5);
  for (size_t i = 1; i + 1 < peaks.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "point " << i);
    EXPECT_LE(peaks[i], peaks[i - 1]);
    const double line = peaks.front() + offloaded[i] / offloaded.back() * (peaks.back() - peaks.front());
    EXPECT_LT(peaks[i], line - 0.1);
  }
}

TEST(OffloadPassTest, SelectiveMeetsTheBudgetOrSaysTheSmallestPeak) {
  PipelineSpec spec;
  spec.num_workers = 8;
  spec.num_microbatches = 16;
  auto s = Generate("interleaved-1f1b", spec);
  ASSERT_TRUE(s.ok());
  const CostModel c = WithLink(spec, 2, 0.5);
  OffloadOptions o;
  o.mode = OffloadMode::kFull;
  auto full = AddOffload(*s, c, o);
  ASSERT_TRUE(full.ok());
  int last = -1;
  for (double budget : {10.0, 6.0, 3.0, MaxPeak(full->sim)}) {
    o.mode = OffloadMode::kSelective;
    o.memory_limit = budget;
    auto plan = AddOffload(*s, c, o);
    ASSERT_TRUE(plan.ok()) << budget << ": " << plan.status();
    EXPECT_LE(MaxPeak(plan->sim), budget + 1e-9);
    EXPECT_GE(plan->offloaded, last) << "a smaller budget offloaded less";
    last = plan->offloaded;
  }
  o.memory_limit = MaxPeak(full->sim) * 0.5;
  auto none = AddOffload(*s, c, o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("smallest peak"), std::string::npos) << none.status();
}

TEST(OffloadPassTest, RejectsSchedulesWithTransfersAndBadModes) {
  EXPECT_FALSE(ParseOffloadMode("most").ok());
  EXPECT_NE(std::string(ParseOffloadMode("most").status().message()).find("none, half, full"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain::schedule

namespace pipetrain::schedule {
namespace {

// Planner over budgets: at each budget the chosen plan fits in simulation; offload plans are
// chosen only when they are needed (or faster); infeasible budgets say the smallest peak.
TEST(AutoOffloadTest, ChosenPlanFitsAtEveryBudget) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  spec.offload_ratio = 0.5;
  double last_makespan = 0;
  for (double budget : {6.0, 4.0, 3.0, 2.0, 1.5}) {
    spec.memory_limit = budget;
    auto s = Generate("auto", spec);
    ASSERT_TRUE(s.ok()) << budget << ": " << s.status();
    auto sim = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
    ASSERT_TRUE(sim.ok());
    EXPECT_LE(MaxPeak(*sim), budget + 1e-9) << s->name;
    // A tighter budget never buys a faster plan.
    EXPECT_GE(sim->makespan, last_makespan - 1e-9) << budget << " " << s->name;
    last_makespan = sim->makespan;
    const auto rows = ExplainAuto(spec);
    const std::string why = ExplainChoice(spec, rows);
    EXPECT_NE(why.find("chosen: "), std::string::npos) << why;
    if (budget == 1.5) {
      // v-min fits 1.5 too (makespan 43.5) but interleaved-1f1b with full offload is faster.
      EXPECT_EQ(s->name, "auto:interleaved-1f1b+offload-full");
      EXPECT_NEAR(sim->makespan, 28.5, 1e-9);
      EXPECT_NE(why.find("offload lowers interleaved-1f1b's peak 5.5 -> 1.5"), std::string::npos)
          << why;
    }
  }
  // Without a link, below one microbatch nothing fits, and the error says how small it gets.
  spec.offload_ratio = 0;
  spec.memory_limit = 0.75;
  auto none = Generate("auto", spec);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("smallest achievable peak is"), std::string::npos);
  EXPECT_NE(none.status().message().find("offload"), std::string::npos);
  // With a link but below what even full offload reaches.
  spec.offload_ratio = 0.5;
  spec.memory_limit = 0.75;
  auto tiny = Generate("auto", spec);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(tiny.status().message().find("with full offload"), std::string::npos)
      << tiny.status();
}

}  // namespace
}  // namespace pipetrain::schedule
