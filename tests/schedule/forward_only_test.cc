// Forward-only (validation) plans: the wavefront order on every placement a generator makes,
// through AddTransfers, ValidateSchedule's forward-only rules and Simulate.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedule/forward_only.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

CostModel UnitCosts(int stages, double comm) {
  CostModel c;
  StageCost s;
  s.f = 1;
  s.b = 1;
  s.w = 1;
  s.activation = 1;
  c.stages.assign(stages, s);
  c.comm = comm;
  return c;
}

// Every generator's placement: one F per (stage, microbatch), in wavefront order on each worker,
// valid with and without transfers, and nothing held in memory.
TEST(ForwardOnlyTest, EveryGeneratorsPlacementGivesAValidWavefront) {
  for (const std::string& name : GeneratorNames()) {
    if (name == "auto") continue;
    PipelineSpec spec;
    spec.num_workers = 4;
    spec.num_microbatches = 8;
    if (name == "v-adaptive") spec.memory_limit = 4;  // it searches under a limit
    absl::StatusOr<Schedule> training = Generate(name, spec);
    ASSERT_TRUE(training.ok()) << name << ": " << training.status();
    for (int m : {1, 3, 8, 13}) {
      absl::StatusOr<Schedule> fwd = MakeForwardOnly(4, training->stage_to_worker, m);
      ASSERT_TRUE(fwd.ok()) << name << " m=" << m << ": " << fwd.status();
      EXPECT_TRUE(fwd->forward_only);
      EXPECT_EQ(fwd->name, kForwardOnlyName);
      EXPECT_EQ(fwd->stage_to_worker, training->stage_to_worker);
      int actions = 0;
      for (const auto& list : fwd->worker_actions) {
        for (size_t k = 0; k < list.size(); ++k) {
          EXPECT_EQ(list[k].kind, ActionKind::kF);
          if (k > 0) {  // (s + i) ascending, the later stage first on a tie
            const Action& a = list[k - 1];
            const Action& b = list[k];
            EXPECT_TRUE(a.stage + a.microbatch < b.stage + b.microbatch ||
                        (a.stage + a.microbatch == b.stage + b.microbatch && a.stage > b.stage))
                << name << ": " << ToString(a) << " before " << ToString(b);
          }
        }
        actions += static_cast<int>(list.size());
      }
      EXPECT_EQ(actions, fwd->num_stages * m) << name;
      absl::StatusOr<Schedule> with_transfers = AddTransfers(*fwd);
      ASSERT_TRUE(with_transfers.ok()) << name << ": " << with_transfers.status();
      EXPECT_TRUE(with_transfers->forward_only);
      for (const auto& list : with_transfers->worker_actions) {
        for (const Action& a : list) {
          EXPECT_TRUE(a.kind == ActionKind::kF || a.kind == ActionKind::kSendAct ||
                      a.kind == ActionKind::kRecvAct)
              << name << ": " << ToString(a);
        }
      }
      absl::StatusOr<SimResult> sim =
          Simulate(*with_transfers, ForwardOnlyCosts(UnitCosts(fwd->num_stages, 0.5)));
      ASSERT_TRUE(sim.ok()) << name << ": " << sim.status();
      for (double peak : sim->peak_memory) EXPECT_EQ(peak, 0.0) << name;
    }
  }
}

// With one stage per worker the wavefront is GPipe's forward phase: m + p - 1 forward times
// without communication, plus (p - 1) messages with it.
TEST(ForwardOnlyTest, LoopPlacementSimulatesToTheFillAndDrainTime) {
  for (int p : {1, 2, 4}) {
    for (int m : {1, 5}) {
      absl::StatusOr<Schedule> fwd = MakeForwardOnly(p, LoopPlacement(p, 1), m);
      ASSERT_TRUE(fwd.ok()) << fwd.status();
      absl::StatusOr<Schedule> plan = AddTransfers(*fwd);
      ASSERT_TRUE(plan.ok()) << plan.status();
      absl::StatusOr<SimResult> none = Simulate(*plan, ForwardOnlyCosts(UnitCosts(p, 0)));
      ASSERT_TRUE(none.ok()) << none.status();
      EXPECT_DOUBLE_EQ(none->makespan, m + p - 1) << "p=" << p << " m=" << m;
      absl::StatusOr<SimResult> comm = Simulate(*plan, ForwardOnlyCosts(UnitCosts(p, 0.25)));
      ASSERT_TRUE(comm.ok()) << comm.status();
      EXPECT_DOUBLE_EQ(comm->makespan, m + p - 1 + 0.25 * (p - 1)) << "p=" << p << " m=" << m;
    }
  }
}

TEST(ForwardOnlyTest, CostsKeepForwardTimesAndDropEverythingElse) {
  CostModel training = UnitCosts(3, 0.5);
  training.stages[1].f = 2.5;
  training.stages[2].bw = 7;
  training.stages[2].freed_by_b = 0.5;
  const CostModel fwd = ForwardOnlyCosts(training);
  ASSERT_EQ(fwd.stages.size(), 3u);
  EXPECT_EQ(fwd.comm, 0.5);
  EXPECT_EQ(fwd.stages[1].f, 2.5);
  for (const StageCost& s : fwd.stages) {
    EXPECT_EQ(s.b, 0);
    EXPECT_EQ(s.w, 0);
    EXPECT_EQ(s.FusedBackward(), 0);
    EXPECT_EQ(s.activation, 0);
    EXPECT_EQ(s.freed_by_b, 0);
  }
}

TEST(ForwardOnlyTest, BadArgumentsAreRefused) {
  EXPECT_EQ(MakeForwardOnly(0, {0}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeForwardOnly(2, {0, 1}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeForwardOnly(2, {0, 2}, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// The validator's forward-only rules.
TEST(ForwardOnlyValidatorTest, BackwardGradientsAndOffloadAreRejected) {
  Schedule s = *MakeForwardOnly(2, {0, 1}, 2);
  Schedule with_b = s;
  with_b.worker_actions[1].push_back({ActionKind::kBW, 1, 0});
  absl::Status status = ValidateSchedule(with_b);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("backward in a forward-only schedule"), std::string::npos)
      << status;

  Schedule missing = s;
  missing.worker_actions[0].pop_back();
  status = ValidateSchedule(missing);
  EXPECT_NE(status.message().find("missing F"), std::string::npos) << status;

  Schedule transfers = *AddTransfers(s);
  transfers.worker_actions[1].push_back({ActionKind::kSendGrad, 1, 0});
  transfers.worker_actions[0].push_back({ActionKind::kRecvGrad, 0, 0});
  status = ValidateSchedule(transfers);
  EXPECT_NE(status.message().find("gradient transfer in a forward-only schedule"),
            std::string::npos)
      << status;

  Schedule offload = s;
  offload.worker_actions[0].insert(offload.worker_actions[0].begin() + 1,
                                   {ActionKind::kOffload, 0, 0});
  status = ValidateSchedule(offload);
  EXPECT_NE(status.message().find("offload in a forward-only schedule"), std::string::npos)
      << status;

  // The same actions without the flag are an incomplete training schedule.
  Schedule unflagged = s;
  unflagged.forward_only = false;
  status = ValidateSchedule(unflagged);
  EXPECT_NE(status.message().find("missing backward"), std::string::npos) << status;
}

}  // namespace
}  // namespace pipetrain::schedule
