// interleaved-zb (gen_interleaved_zb.h): looped placement with B/W split. Exact step times at
// unit costs (ZB-V's, at interleaved 1F1B's peak and at ZB-V's own peak p), never slower than
// interleaved-1f1b, the cap respected, v > 2, and refusals naming the field.
#include <algorithm>
#include <array>
#include <string>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

using testing::Spec;

struct Result {
  double makespan, peak;
};
Result Plan(const char* name, PipelineSpec spec) {
  auto s = Generate(name, spec);
  EXPECT_TRUE(s.ok()) << name << ": " << s.status();
  if (!s.ok()) return {0, 0};
  EXPECT_EQ(s->ChunksPerWorker(), spec.chunks_per_worker == 0 ? 2 : spec.chunks_per_worker);
  auto r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
  EXPECT_TRUE(r.ok()) << r.status();
  return {r->makespan, MaxPeak(*r)};
}

TEST(InterleavedZbTest, UnitCostsReachZbVStepTime) {
  // Measured 2026-11-26: p = 4, m = 8: 25.5 (ZB-V's), interleaved-1f1b 28.5; peak 5.5 units
  // (interleaved 1F1B's) by default and 4 (ZB-V's) under memory_limit 4.
  for (int p : {4, 8}) {
    for (int m : {2 * p, 4 * p}) {
      const Result zbv = Plan("zb-v", Spec(p, m));
      const Result il = Plan("interleaved-1f1b", Spec(p, m));
      const Result izb = Plan("interleaved-zb", Spec(p, m));
      EXPECT_DOUBLE_EQ(izb.makespan, zbv.makespan) << p << " " << m;
      EXPECT_LT(izb.makespan, il.makespan) << p << " " << m;
      EXPECT_LE(izb.peak, il.peak + 1e-9);
      PipelineSpec tight = Spec(p, m);
      tight.memory_limit = p;
      const Result small = Plan("interleaved-zb", tight);
      EXPECT_DOUBLE_EQ(small.makespan, zbv.makespan) << p << " " << m;
      EXPECT_LE(small.peak, p + 1e-9);
    }
  }
  EXPECT_DOUBLE_EQ(Plan("interleaved-zb", Spec(4, 8)).makespan, 25.5);
  EXPECT_DOUBLE_EQ(Plan("interleaved-zb", Spec(4, 8)).peak, 5.5);
}

TEST(InterleavedZbTest, NeverSlowerThanInterleaved1F1B) {
  for (int p : {2, 3, 4, 6}) {
    for (int m : {p, 2 * p, 3 * p}) {
      for (double comm : {0.0, 0.2}) {
        for (const auto& c : {std::array<double, 3>{1, 1, 1}, std::array<double, 3>{1, 2, 1},
                              std::array<double, 3>{1, 1.5, 0.5}}) {
          const PipelineSpec spec = Spec(p, m, c[0], c[1], c[2], comm);
          const Result il = Plan("interleaved-1f1b", spec);
          const Result izb = Plan("interleaved-zb", spec);
          EXPECT_LE(izb.makespan, il.makespan + 1e-9) << p << " " << m << " " << comm;
          EXPECT_LE(izb.peak, il.peak + 1e-9) << p << " " << m << " " << comm;
        }
      }
    }
  }
}

TEST(InterleavedZbTest, MoreChunksAndRefusals) {
  PipelineSpec three = Spec(4, 8);
  three.chunks_per_worker = 3;
  const Result r = Plan("interleaved-zb", three);
  EXPECT_GT(r.makespan, 0);
  PipelineSpec one = Spec(4, 8);
  one.chunks_per_worker = 1;
  EXPECT_NE(Generate("interleaved-zb", one).status().message().find("chunks_per_worker"),
            std::string::npos);
  EXPECT_NE(Generate("interleaved-zb", Spec(4, 6)).status().message().find("num_microbatches"),
            std::string::npos)
      << Generate("interleaved-zb", Spec(4, 6)).status();
  PipelineSpec tiny = Spec(4, 8);
  tiny.memory_limit = 2;
  auto s = Generate("interleaved-zb", tiny);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("memory_limit"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace pipetrain::schedule
