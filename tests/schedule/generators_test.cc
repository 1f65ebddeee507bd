// Every classic generator over a grid of (p, m): validates, simulates, and meets its closed
// forms with unit costs (F = B = W = 1, so BW = 2).
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

constexpr double kEps = 1e-12;

std::vector<int> MicrobatchCounts(int p) {
  std::vector<int> ms;
  for (int m : {1, p - 1, p, 2 * p, 4 * p + 1}) {
    if (m >= 1 && std::find(ms.begin(), ms.end(), m) == ms.end()) ms.push_back(m);
  }
  return ms;
}

struct Planned {
  Schedule schedule;
  SimResult sim;
};

Planned Plan(const std::string& name, int p, int m, int v = 0) {
  PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = m;
  spec.chunks_per_worker = v;
  auto s = Generate(name, spec);
  EXPECT_TRUE(s.ok()) << name << " p=" << p << " m=" << m << ": " << s.status();
  if (!s.ok()) return {};
  EXPECT_TRUE(ValidateSchedule(*s).ok());
  auto r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  // Explicit transfers validate and simulate identically (comm = 0 here) ...
  auto t = AddTransfers(*s);
  EXPECT_TRUE(t.ok()) << t.status();
  if (t.ok()) {
    auto rt = Simulate(*t, CostModelFor(spec, s->ChunksPerWorker()));
    EXPECT_TRUE(rt.ok()) << rt.status();
    if (rt.ok()) {
      EXPECT_DOUBLE_EQ(rt->makespan, r->makespan);
    }
    // ... and stay deadlock-free, matching implicit comm, when messages take time.
    spec.comm = 0.3;
    auto ri = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
    auto re = Simulate(*t, CostModelFor(spec, s->ChunksPerWorker()));
    EXPECT_TRUE(ri.ok() && re.ok());
    if (ri.ok() && re.ok()) {
      EXPECT_DOUBLE_EQ(ri->makespan, re->makespan);
    }
  }
  return {*std::move(s), *std::move(r)};
}

class GridTest : public ::testing::TestWithParam<int> {};

TEST_P(GridTest, GPipe) {
  const int p = GetParam();
  for (int m : MicrobatchCounts(p)) {
    SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m);
    Planned r = Plan("gpipe", p, m);
    EXPECT_NEAR(r.sim.bubble_ratio, double(p - 1) / (m + p - 1), kEps);
    for (int w = 0; w < p; ++w) EXPECT_DOUBLE_EQ(r.sim.peak_memory[w], m);
    EXPECT_DOUBLE_EQ(r.sim.makespan, 3.0 * (m + p - 1));
  }
}

TEST_P(GridTest, OneFOneB) {
  const int p = GetParam();
  for (int m : MicrobatchCounts(p)) {
    SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m);
    Planned r = Plan("1f1b", p, m);
    EXPECT_NEAR(r.sim.bubble_ratio, double(p - 1) / (m + p - 1), kEps);
    EXPECT_DOUBLE_EQ(r.sim.makespan, 3.0 * (m + p - 1));
    for (int w = 0; w < p; ++w) EXPECT_DOUBLE_EQ(r.sim.peak_memory[w], std::min(m, p - w));
  }
}

TEST_P(GridTest, Interleaved) {
  const int p = GetParam();
  for (int v : {2, 3}) {
    for (int m : MicrobatchCounts(p)) {
      SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m << " v=" << v);
      PipelineSpec spec;
      spec.num_workers = p;
      spec.num_microbatches = m;
      spec.chunks_per_worker = v;
      auto s = Generate("interleaved-1f1b", spec);
      if (m % p != 0) {
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(s.status().message().find("multiple of num_workers"), std::string::npos);
        continue;
      }
      Planned r = Plan("interleaved-1f1b", p, m, v);
      EXPECT_EQ(r.schedule.num_stages, p * v);
      EXPECT_NEAR(r.sim.bubble_ratio, double(p - 1) / (v * m + p - 1), 1e-9);
      // Worker 0 holds its 2(p-1) + (v-1)p warm-up chunks plus one, at 1/v unit each.
      const double warm = std::min(2 * (p - 1) + (v - 1) * p + 1, m * v);
      EXPECT_NEAR(r.sim.peak_memory[0], warm / v, 1e-9);
    }
  }
}

TEST_P(GridTest, ZbH1) {
  const int p = GetParam();
  for (int m : MicrobatchCounts(p)) {
    SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m);
    Planned r = Plan("zb-h1", p, m);
    EXPECT_LE(MaxPeak(r.sim), std::min(m, p) + kEps);
    if (m >= p) {
      EXPECT_NEAR(r.sim.bubble_ratio, double(p - 1) / (3 * m + p - 1), kEps);
      EXPECT_DOUBLE_EQ(r.sim.peak_memory[0], p);
    }
  }
}

TEST_P(GridTest, ZbH2) {
  const int p = GetParam();
  for (int m : MicrobatchCounts(p)) {
    SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m);
    Planned r = Plan("zb-h2", p, m);
    EXPECT_LE(MaxPeak(r.sim), std::min(m, 2 * p) + kEps);
    if (m >= 2 * p) {
      EXPECT_NEAR(r.sim.bubble_ratio, 0.0, kEps) << "peak " << MaxPeak(r.sim);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, GridTest, ::testing::Values(1, 2, 3, 4, 8, 16));

TEST(ZbMemoryLimitTest, RespectsLimitOrFailsClearly) {
  for (const char* name : {"zb-h1", "zb-h2"}) {
    for (double limit : {1.0, 2.0, 3.0}) {
      PipelineSpec spec;
      spec.num_workers = 4;
      spec.num_microbatches = 12;
      spec.memory_limit = limit;
      auto s = Generate(name, spec);
      ASSERT_TRUE(s.ok()) << name << " " << limit << ": " << s.status();
      auto r = Simulate(*s, CostModelFor(spec, 1));
      ASSERT_TRUE(r.ok());
      EXPECT_LE(MaxPeak(*r), limit + kEps) << name;
    }
    PipelineSpec spec;
    spec.num_workers = 4;
    spec.num_microbatches = 12;
    spec.memory_limit = 0.5;
    auto s = Generate(name, spec);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(std::string(s.status().message()).find("memory_limit"), std::string::npos);
  }
}

TEST(ZbMemoryLimitTest, MoreMemoryNeverSlower) {
  // zb-h2's extra memory buys a bubble no larger than zb-h1's, at real unequal costs and comm.
  for (int p : {4, 8}) {
    PipelineSpec spec;
    spec.num_workers = p;
    spec.num_microbatches = 3 * p;
    spec.f = 1.0;
    spec.b = 2.0;
    spec.w = 1.0;
    spec.comm = 0.25;
    auto h1 = Generate("zb-h1", spec);
    auto h2 = Generate("zb-h2", spec);
    auto one = Generate("1f1b", spec);
    ASSERT_TRUE(h1.ok() && h2.ok() && one.ok());
    const double m1 = Simulate(*h1, CostModelFor(spec, 1))->makespan;
    const double m2 = Simulate(*h2, CostModelFor(spec, 1))->makespan;
    const double mo = Simulate(*one, CostModelFor(spec, 1))->makespan;
    EXPECT_LE(m2, m1) << p;
    EXPECT_LT(m1, mo) << p;
  }
}

TEST(RegistryTest, UnknownNameListsValidOnes) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  auto s = Generate("2f2b", spec);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& n : GeneratorNames()) {
    EXPECT_NE(s.status().message().find(n), std::string::npos) << n;
  }
}

TEST(RegistryTest, RejectsBadSpecFields) {
  PipelineSpec spec;
  spec.num_workers = 0;
  spec.num_microbatches = 8;
  EXPECT_NE(Generate("1f1b", spec).status().message().find("num_workers"), std::string::npos);
  spec.num_workers = 4;
  spec.num_microbatches = 0;
  EXPECT_NE(Generate("1f1b", spec).status().message().find("num_microbatches"), std::string::npos);
  spec.num_microbatches = 8;
  spec.chunks_per_worker = 2;
  EXPECT_NE(Generate("1f1b", spec).status().message().find("chunks_per_worker"), std::string::npos);
  spec.chunks_per_worker = 0;
  spec.f = -1;
  EXPECT_EQ(Generate("1f1b", spec).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::schedule
