// SimulateSharedCores: with a device (or a core) per worker it is the simulator; with one core it
// is the summed compute; in between it lies between the two bounds a shared host allows.
#include "schedule/shared_core_simulator.h"

#include <numeric>
#include <string>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {
namespace {

struct Case {
  Schedule schedule;
  CostModel costs;
};

Case Make(const std::string& name, double comm, bool transfers) {
  PipelineSpec spec;
  spec.num_workers = 4;
  spec.num_microbatches = 8;
  spec.f = 1.0;
  spec.b = 1.5;
  spec.w = 0.7;
  spec.comm = comm;
  Schedule s = Generate(name, spec).value();
  if (transfers) s = AddTransfers(s).value();
  return {s, CostModelFor(spec, s.ChunksPerWorker())};
}

CoreSharing OneHost(int workers, double cores) {
  return {std::vector<int>(workers, 0), {cores}, std::vector<int>(workers, 1)};
}

const char* const kSchedules[] = {"gpipe",  "1f1b", "interleaved-1f1b", "zb-h1", "zb-v",
                                  "v-half", "v-min"};

TEST(SharedCoreSimulatorTest, ADeviceOrACorePerWorkerIsTheSimulator) {
  for (const char* name : kSchedules) {
    for (double comm : {0.0, 0.3}) {
      for (bool transfers : {false, true}) {
        const Case c = Make(name, comm, transfers);
        const double simulated = Simulate(c.schedule, c.costs).value().makespan;
        const CoreSharing own = {std::vector<int>(4, -1), {}, std::vector<int>(4, 1)};
        EXPECT_NEAR(SimulateSharedCores(c.schedule, c.costs, own).value(), simulated, 1e-9)
            << name << " comm " << comm << " transfers " << transfers;
        EXPECT_NEAR(SimulateSharedCores(c.schedule, c.costs, OneHost(4, 4)).value(), simulated,
                    1e-9)
            << name;
      }
    }
  }
}

TEST(SharedCoreSimulatorTest, OneCoreRunsTheSummedComputeWithoutComm) {
  for (const char* name : kSchedules) {
    const Case c = Make(name, 0.0, true);
    const SimResult sim = Simulate(c.schedule, c.costs).value();
    const double work = std::accumulate(sim.busy.begin(), sim.busy.end(), 0.0);
    EXPECT_NEAR(SimulateSharedCores(c.schedule, c.costs, OneHost(4, 1)).value(), work, 1e-9)
        << name;
  }
}

TEST(SharedCoreSimulatorTest, TwoCoresLieBetweenTheWorkBoundAndTheHalfSpeedSimulation) {
  // Four workers on two cores: never faster than their work / 2 (nor than the simulation), never
  // slower than every action at half speed (fair sharing gives each at least half a core).
  for (const char* name : kSchedules) {
    for (double comm : {0.0, 0.3}) {
      const Case c = Make(name, comm, true);
      const SimResult sim = Simulate(c.schedule, c.costs).value();
      const double work = std::accumulate(sim.busy.begin(), sim.busy.end(), 0.0);
      const double shared = SimulateSharedCores(c.schedule, c.costs, OneHost(4, 2)).value();
      EXPECT_GE(shared, std::max(sim.makespan, work / 2) - 1e-9) << name;
      Case slow = c;
      for (StageCost& st : slow.costs.stages) {
        st.f *= 2;
        st.b *= 2;
        st.w *= 2;
        if (st.bw >= 0) st.bw *= 2;
      }
      const double half_speed = Simulate(slow.schedule, slow.costs).value().makespan;
      EXPECT_LE(shared, half_speed + 1e-9) << name << " comm " << comm;
    }
  }
}

TEST(SharedCoreSimulatorTest, ExactTimesOfTwoWorkersOnOneCore) {
  // 1F1B on 2 workers, 1 microbatch, F = B = W = 1 per worker share (BW = 2), no comm: the
  // four actions run one after another on the single core.
  PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 1;
  Schedule s = AddTransfers(Generate("1f1b", spec).value()).value();
  const CostModel costs = CostModelFor(spec, 1);
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, OneHost(2, 1)).value(), 6.0);
  EXPECT_DOUBLE_EQ(Simulate(s, costs).value().makespan, 6.0);
  // Two microbatches: F0 on worker 0 then F1(w0) and F0(w1) share the core...
  spec.num_microbatches = 2;
  s = AddTransfers(Generate("gpipe", spec).value()).value();
  // Work: 2 workers x 2 microbatches x (F 1 + BW 2) = 12; one core is never idle: 12.
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, CostModelFor(spec, 1), OneHost(2, 1)).value(), 12.0);
}

TEST(SharedCoreSimulatorTest, RejectsMismatchedSharing) {
  const Case c = Make("1f1b", 0.0, true);
  EXPECT_EQ(SimulateSharedCores(c.schedule, c.costs, OneHost(3, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  CoreSharing bad = OneHost(4, 0);
  EXPECT_EQ(SimulateSharedCores(c.schedule, c.costs, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::schedule
