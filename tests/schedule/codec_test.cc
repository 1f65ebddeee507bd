// The codec between the schedule IR and the wire (pipetrain.v1.Plan): IR -> proto -> IR gives
// back the same schedule, action for action, for every generator, with transfers and with every
// offload mode; the cost model comes back field for field; JSON (plan files) round-trips.
#include "schedule/codec/plan_proto.h"

#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/offload_pass.h"
#include "schedule/passes.h"
#include "schedule/schedule_io.h"
#include "schedule/simulator.h"
#include "tests/schedule/test_util.h"

namespace pipetrain::schedule {
namespace {

void ExpectSameSchedule(const Schedule& a, const Schedule& b, const std::string& where) {
  EXPECT_EQ(a.name, b.name) << where;
  EXPECT_EQ(a.num_workers, b.num_workers) << where;
  EXPECT_EQ(a.num_stages, b.num_stages) << where;
  EXPECT_EQ(a.num_microbatches, b.num_microbatches) << where;
  EXPECT_EQ(a.stage_to_worker, b.stage_to_worker) << where;
  EXPECT_EQ(ScheduleToText(a), ScheduleToText(b)) << where;
}

// Every registered generator (plus transfers), and each with every offload mode.
std::vector<Schedule> Corpus() {
  std::vector<Schedule> out;
  for (const std::string& name : GeneratorNames()) {
    PipelineSpec spec = testing::Spec(4, 8, 1, 1.5, 0.5, 0.1);
    if (name == "v-adaptive" || name == "auto") spec.memory_limit = 3;
    absl::StatusOr<Schedule> compute = Generate(name, spec);
    EXPECT_TRUE(compute.ok()) << name << ": " << compute.status();
    if (!compute.ok()) continue;
    absl::StatusOr<Schedule> with_transfers = AddTransfers(*compute);
    EXPECT_TRUE(with_transfers.ok()) << name << ": " << with_transfers.status();
    if (with_transfers.ok()) out.push_back(*with_transfers);
    PipelineSpec link = spec;
    link.offload_ratio = 0.5;
    const CostModel costs = CostModelFor(link, compute->ChunksPerWorker());
    for (OffloadMode mode : {OffloadMode::kHalf, OffloadMode::kFull, OffloadMode::kSelective}) {
      OffloadOptions options;
      options.mode = mode;
      options.memory_limit = 2;
      absl::StatusOr<OffloadPlan> offloaded = AddOffload(*compute, costs, options);
      if (offloaded.ok()) out.push_back(offloaded->schedule);
    }
  }
  return out;
}

TEST(PlanCodecTest, ScheduleRoundTripsForEveryGeneratorAndOffloadMode) {
  const std::vector<Schedule> corpus = Corpus();
  int transfers = 0, offloads = 0, reloads = 0;
  for (const Schedule& s : corpus) {
    for (const auto& list : s.worker_actions) {
      for (const Action& a : list) {
        transfers += IsTransfer(a.kind);
        offloads += a.kind == ActionKind::kOffload;
        reloads += a.kind == ActionKind::kReload;
      }
    }
    const v1::Plan plan = PlanToProto(s, UniformCostModel(s.num_workers, s.ChunksPerWorker(), 1,
                                                          1, 1),
                                      nullptr);
    absl::StatusOr<Schedule> back = ScheduleFromProto(plan);
    ASSERT_TRUE(back.ok()) << s.name << ": " << back.status();
    ExpectSameSchedule(s, *back, s.name);
  }
  // The corpus covers what the codec must carry: every generator, transfers and offloads.
  EXPECT_GE(corpus.size(), GeneratorNames().size());
  EXPECT_GT(transfers, 0);
  EXPECT_GT(offloads, 0);
  EXPECT_EQ(reloads, offloads);
}

TEST(PlanCodecTest, CostModelRoundTripsFieldForField) {
  CostModel costs;
  costs.bytes_per_unit = 1;  // the planner's convention: bytes
  costs.comm = 0.0125;
  costs.offload = 0.002;
  costs.reload = 0.003;
  costs.d2h_bytes_per_s = 12e9;
  costs.h2d_bytes_per_s = 11e9;
  costs.duplex = false;
  for (int s = 0; s < 4; ++s) {
    StageCost c;
    c.f = 0.01 * (s + 1);
    c.b = 0.02 * (s + 1);
    c.w = 0.005 * (s + 1);
    c.activation = 1 << (20 + s);
    c.freed_by_b = 1 << (18 + s);
    if (s == 1) c.bw = 0.05;
    if (s == 2) c.offload_bytes = 4096;
    costs.stages.push_back(c);
  }
  const Schedule s = Generate("1f1b", testing::Spec(4, 4)).value();
  const CostModel back = CostModelFromProto(PlanToProto(s, costs, nullptr));
  EXPECT_EQ(back.bytes_per_unit, 1);
  EXPECT_EQ(back.comm, costs.comm);
  EXPECT_EQ(back.offload, costs.offload);
  EXPECT_EQ(back.reload, costs.reload);
  EXPECT_EQ(back.d2h_bytes_per_s, costs.d2h_bytes_per_s);
  EXPECT_EQ(back.h2d_bytes_per_s, costs.h2d_bytes_per_s);
  EXPECT_EQ(back.duplex, costs.duplex);
  ASSERT_EQ(back.stages.size(), costs.stages.size());
  for (size_t i = 0; i < costs.stages.size(); ++i) {
    const StageCost &a = costs.stages[i], &b = back.stages[i];
    EXPECT_EQ(a.f, b.f) << i;
    EXPECT_EQ(a.b, b.b) << i;
    EXPECT_EQ(a.w, b.w) << i;
    EXPECT_EQ(a.bw, b.bw) << i;
    EXPECT_EQ(a.activation, b.activation) << i;
    EXPECT_EQ(a.freed_by_b, b.freed_by_b) << i;
    EXPECT_EQ(a.offload_bytes, b.offload_bytes) << i;
    EXPECT_EQ(costs.OffloadTime(i), back.OffloadTime(i)) << i;
    EXPECT_EQ(costs.ReloadTime(i), back.ReloadTime(i)) << i;
  }
}

TEST(PlanCodecTest, PlanRoundTripsThroughJson) {
  const Schedule s = AddTransfers(Generate("v-half", testing::Spec(4, 8)).value()).value();
  const CostModel costs = UniformCostModel(4, 2, 1, 1, 1, 0.1);
  const SimResult sim = Simulate(s, costs).value();
  const v1::Plan plan = PlanToProto(s, costs, &sim);
  // Both bubbles travel in the prediction.
  EXPECT_DOUBLE_EQ(plan.prediction().bubble_ratio(), sim.bubble_ratio);
  EXPECT_DOUBLE_EQ(plan.prediction().step_bubble_ratio(), sim.step_bubble_ratio);
  EXPECT_GT(plan.prediction().step_bubble_ratio(), 0.0);
  absl::StatusOr<std::string> json = ToJson(plan);
  ASSERT_TRUE(json.ok()) << json.status();
  v1::Plan back;
  ASSERT_TRUE(FromJson(*json, &back).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(plan, back));
  // A plan from the wire is untrusted: a transfer naming the wrong peer is rejected.
  v1::Plan wrong = plan;
  for (v1::Action& a : *wrong.mutable_workers(0)->mutable_actions()) {
    if (a.kind() == v1::ACTION_KIND_SEND_ACT) {
      a.set_peer_worker(3);
      break;
    }
  }
  EXPECT_EQ(ScheduleFromProto(wrong).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::schedule
