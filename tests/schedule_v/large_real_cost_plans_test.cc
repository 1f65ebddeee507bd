// The plans at the generation-speed benchmark's size (p = 64, m = 1024, F:B:W = 1:1.5:0.5 with
// a transfer of 0.2; bench/suite/generation_speed.cc), pinned: work on generation speed must
// leave them unchanged or better (a shorter step at no more memory). Values recorded before the
// 2026-11-27 speed work with bench/schedule/gen_fingerprint (which also hashes the orders).
#include <algorithm>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {
namespace {

struct PinnedPlan {
  const char* name;
  double memory_limit;  // units; 0 = none
  double step;          // simulated makespan with transfers
  double peak;          // units
};

TEST(LargeRealCostPlansTest, NoWorseThanBeforeTheSpeedWork) {
  const PinnedPlan kPinned[] = {
      {"zb-v", 0, 3210.1, 64},
      {"v-zb", 0, 3210.1, 64},
      {"v-half", 0, 4092.0, 33},
      {"v-min", 0, 6022.15, 22},
      {"v-adaptive", 40, 3944.6, 39.5},
      // Also pinned since (gen_fingerprint, 2026-11-27, before interleaved-zb stopped
      // simulating its large plans and auto went on threads):
      {"interleaved-zb", 0, 3157.45, 95.5},
      {"zb-h1", 0, 3248.4, 64},
      {"auto", 40, 3944.6, 39.5},
  };
  for (const PinnedPlan& pin : kPinned) {
    PipelineSpec spec;
    spec.num_workers = 64;
    spec.num_microbatches = 1024;
    spec.f = 1;
    spec.b = 1.5;
    spec.w = 0.5;
    spec.comm = 0.2;
    spec.memory_limit = pin.memory_limit;
    absl::StatusOr<Schedule> s = Generate(pin.name, spec);
    ASSERT_TRUE(s.ok()) << pin.name << ": " << s.status();
    absl::StatusOr<Schedule> plan = AddTransfers(*s);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<SimResult> r = Simulate(*plan, CostModelFor(spec, s->ChunksPerWorker()));
    ASSERT_TRUE(r.ok()) << r.status();
    const double peak = MaxPeak(*r);
    EXPECT_LE(r->makespan, pin.step + 1e-6) << pin.name;
    EXPECT_LE(peak, pin.peak + 1e-9) << pin.name;
  }
}

}  // namespace
}  // namespace pipetrain::schedule
