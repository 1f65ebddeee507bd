// SimulateSharedCores: with a device (or a core) per worker it is the simulator; with one core it
// is the summed compute; in between it lies between the two bounds a shared host allows. With
// replicas: side by side on their own devices they are the planner's data-parallel step, on
// shared cores they compute at once, and a later replica waits for the sum before going on.
#include "schedule/shared_core_simulator.h"

#include <numeric>
#include <string>

#include "gtest/gtest.h"
#include "schedule/data_parallel_step.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"

namespace pipetrain::schedule {
namespace {

struct Case {
  Schedule schedule;
  CostModel costs;
};

Case MakeCase(const std::string& name, double comm, bool transfers) {
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

CoreSharing OwnDevices(int workers) {
  return {std::vector<int>(workers, -1), {}, std::vector<int>(workers, 1)};
}

const char* const kSchedules[] = {"gpipe",  "1f1b", "interleaved-1f1b", "zb-h1", "zb-v",
                                  "v-half", "v-min"};

TEST(SharedCoreSimulatorTest, ADeviceOrACorePerWorkerIsTheSimulator) {
  for (const char* name : kSchedules) {
    for (double comm : {0.0, 0.3}) {
      for (bool transfers : {false, true}) {
        const Case c = MakeCase(name, comm, transfers);
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
    const Case c = MakeCase(name, 0.0, true);
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
      const Case c = MakeCase(name, comm, true);
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

// Messages' CPU (StepCpuWork::message_cpu_s): a job on the sender's host from the send on; the
// message arrives at the later of its link time and that job's end.
TEST(SharedCoreSimulatorTest, MessagesCostTheirHostsCoresAndArriveWhenDone) {
  PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 1;
  Schedule s = AddTransfers(Generate("1f1b", spec).value()).value();
  CostModel costs = CostModelFor(spec, 1);
  StepCpuWork messages;
  messages.message_cpu_s = 0.5;
  // One core, no link time: F0 [0, 1], the activation's work [1, 1.5], F1 [1.5, 2.5], BW1
  // [2.5, 4.5], the gradient's work [4.5, 5], BW0 [5, 7].
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, OneHost(2, 1), {}, messages).value(), 7.0);
  // A link time longer than the work on an idle core hides it: 6 + 2 x 0.8 either way.
  costs.comm = 0.8;
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, OneHost(2, 1), {}, messages).value(), 7.6);
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, OneHost(2, 1)).value(), 7.6);
  // Senders with a device of their own keep the link time alone.
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, OwnDevices(2), {}, messages).value(),
                   Simulate(s, costs).value().makespan);
  // Sharing the core with compute: GPipe, 2 microbatches, one core, no link time. The core is
  // never idle (a message's work is itself work), so the step is all the work: 2 workers x 2
  // microbatches x (F 1 + BW 2) and 4 messages x 0.5.
  spec.num_microbatches = 2;
  s = AddTransfers(Generate("gpipe", spec).value()).value();
  EXPECT_DOUBLE_EQ(
      SimulateSharedCores(s, CostModelFor(spec, 1), OneHost(2, 1), {}, messages).value(), 14.0);
  messages.message_cpu_s = -1;
  EXPECT_EQ(
      SimulateSharedCores(s, CostModelFor(spec, 1), OneHost(2, 1), {}, messages).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(SharedCoreSimulatorTest, RejectsMismatchedSharing) {
  const Case c = MakeCase("1f1b", 0.0, true);
  EXPECT_EQ(SimulateSharedCores(c.schedule, c.costs, OneHost(3, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  CoreSharing bad = OneHost(4, 0);
  EXPECT_EQ(SimulateSharedCores(c.schedule, c.costs, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Data parallelism: d replicas of the schedule, job rank q * p + w.

TEST(SharedCoreSimulatorTest, ReplicasWithADevicePerWorkerAreTheDataParallelStep) {
  // 1F1B and GPipe without explicit transfers end each stage's worker with the stage's last
  // backward, so waiting for the sum delays nothing else: the step is the schedule's plus the
  // chained sums, exactly the planner's data-parallel model (data_parallel_step.h) for any d.
  // (With explicit transfers the last SEND_GRAD comes after the wait, as the executor runs it.)
  for (const char* name : {"1f1b", "gpipe"}) {
    for (int d : {2, 3, 4}) {
      const Case c = MakeCase(name, 0.3, false);
      const SimResult sim = Simulate(c.schedule, c.costs).value();
      const std::vector<double> sums = {0.5, 0.8, 1.1, 0.2};
      const double step = SimulateDataParallelStep(c.schedule, sim, sums).value().step_s;
      EXPECT_NEAR(SimulateSharedCores(c.schedule, c.costs, OwnDevices(4 * d), {d, sums}).value(),
                  step, 1e-9)
          << name << " d " << d;
      // Without sums the replicas run side by side, each as the plain simulation.
      EXPECT_NEAR(SimulateSharedCores(c.schedule, c.costs, OwnDevices(4 * d),
                                      {d, std::vector<double>(4, 0.0)})
                      .value(),
                  sim.makespan, 1e-9)
          << name << " d " << d;
    }
  }
}

TEST(SharedCoreSimulatorTest, ReplicasOnSharedCoresComputeAtOnce) {
  // The term a plan of one replica misses: on one core, d replicas take d times the summed
  // work; on two cores, 2 replicas of a 4-worker pipeline are bounded by their work / 2 and are
  // slower than the one replica the cores would give.
  for (const char* name : kSchedules) {
    const Case c = MakeCase(name, 0.0, true);
    const SimResult sim = Simulate(c.schedule, c.costs).value();
    const double work = std::accumulate(sim.busy.begin(), sim.busy.end(), 0.0);
    const ReplicaSums two = {2, std::vector<double>(c.schedule.num_stages, 0.0)};
    EXPECT_NEAR(SimulateSharedCores(c.schedule, c.costs, OneHost(8, 1), two).value(), 2 * work,
                1e-9)
        << name;
    const double shared = SimulateSharedCores(c.schedule, c.costs, OneHost(8, 2), two).value();
    EXPECT_GE(shared, work - 1e-9) << name;
    EXPECT_GT(shared, SimulateSharedCores(c.schedule, c.costs, OneHost(4, 2)).value()) << name;
  }
}

TEST(SharedCoreSimulatorTest, ALaterReplicaWaitsForTheSumBeforeItsNextAction) {
  // One worker holding two stages, one microbatch: F0 F1 B1 W1 B0 W0, every action 1 s. Stage
  // 1's last W ends at 4; replica 1 waits there for replica 0's sum of stage 1 (one hop, 1 s of
  // its 2 s sum), sends the complete sum back and only then runs B0 and W0 (ending at 7, a hop
  // late). Stage 0's sum takes no time: the step ends at 7, where a model that lets the sum
  // overlap everything (data_parallel_step.h) says max(6, 4 + 2, 6 + 0) = 6.
  Schedule s = MakeEmptySchedule("hand", 1, 1, {0, 0});
  s.worker_actions[0] = {{ActionKind::kF, 0, 0}, {ActionKind::kF, 1, 0}, {ActionKind::kB, 1, 0},
                         {ActionKind::kW, 1, 0}, {ActionKind::kB, 0, 0}, {ActionKind::kW, 0, 0}};
  CostModel costs;
  costs.stages.assign(2, StageCost{});  // F = B = W = 1
  const std::vector<double> sums = {0.0, 2.0};
  const SimResult sim = Simulate(s, costs).value();
  EXPECT_DOUBLE_EQ(SimulateDataParallelStep(s, sim, sums).value().step_s, 6.0);
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, OwnDevices(2), {2, sums}).value(), 7.0);
  // On one shared core both replicas run at half speed until W1 ends at 8; while replica 1
  // waits for the sum (8 to 9) replica 0 has the core (B0 8 to 9), then both share it (9 to 11)
  // and replica 1 ends W0 alone at 12: the core never idles, so the step is the 12 s of work.
  EXPECT_DOUBLE_EQ(SimulateSharedCores(s, costs, {{0, 0}, {1.0}, {1, 1}}, {2, sums}).value(), 12.0);
}

TEST(SharedCoreSimulatorTest, RejectsMismatchedReplicas) {
  const Case c = MakeCase("1f1b", 0.0, true);
  // 2 replicas need 8 workers' sharing and a sum per stage.
  EXPECT_EQ(
      SimulateSharedCores(c.schedule, c.costs, OneHost(4, 2), {2, {1, 1, 1, 1}}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulateSharedCores(c.schedule, c.costs, OneHost(8, 2), {2, {1, 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      SimulateSharedCores(c.schedule, c.costs, OneHost(8, 2), {2, {1, -1, 1, 1}}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::schedule
