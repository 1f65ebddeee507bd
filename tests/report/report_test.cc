// Job report on synthetic step traces: a trace that replays the plan's prediction at twice the
// duration must measure exactly twice the step time, the same bubble and the same memory.
#include "client/report.h"

#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/shared_core_simulator.h"

namespace pipetrain::client {
namespace {

constexpr double kActivationBytes = 1000;  // per stage and microbatch
constexpr double kFreedByB = 400;

struct Planned {
  schedule::Schedule schedule;
  schedule::CostModel costs;
  schedule::SimResult sim;
  v1::Plan plan;
};

Planned MakePlan(const char* name, int p, int m) {
  schedule::PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = m;
  spec.f = 0.001;
  spec.b = 0.001;
  spec.w = 0.001;
  auto compute = schedule::Generate(name, spec);
  EXPECT_TRUE(compute.ok()) << compute.status();
  Planned out;
  out.schedule = *schedule::AddTransfers(*compute);
  out.costs = schedule::CostModelFor(spec, out.schedule.ChunksPerWorker());
  out.costs.comm = 0.0002;
  out.costs.bytes_per_unit = 1;
  for (auto& s : out.costs.stages) {
    s.activation = kActivationBytes;
    s.freed_by_b = kFreedByB;
  }
  out.sim = *schedule::Simulate(out.schedule, out.costs);
  out.plan = schedule::PlanToProto(out.schedule, out.costs, &out.sim);
  return out;
}

// Each rank's actions at `stretch` times their simulated times, with the resident bytes the
// executor would record (F +activation, B -freed_by_b, W the rest, BW all).
v1::StepTrace ReplayTrace(const Planned& planned, double stretch) {
  v1::StepTrace trace;
  trace.set_job_id("job-000042");
  trace.set_step(7);
  const int p = planned.schedule.num_workers;
  std::vector<std::vector<const schedule::TimedAction*>> by_worker(p);
  for (const auto& t : planned.sim.timeline) by_worker[t.worker].push_back(&t);
  for (int r = 0; r < p; ++r) {
    v1::StepReport* rank = trace.add_ranks();
    rank->set_rank(r);
    int64_t resident = 0;
    for (const schedule::TimedAction* t : by_worker[r]) {
      v1::ActionTiming* timing = rank->add_timings();
      timing->mutable_action()->set_kind(schedule::ActionKindToProto(t->action.kind));
      timing->mutable_action()->set_stage(t->action.stage);
      timing->mutable_action()->set_microbatch(t->action.microbatch);
      timing->set_start_ns(static_cast<int64_t>(t->start * stretch * 1e9 + 0.5));
      timing->set_end_ns(static_cast<int64_t>(t->end * stretch * 1e9 + 0.5));
      switch (t->action.kind) {
        case schedule::ActionKind::kF: resident += kActivationBytes; break;
        case schedule::ActionKind::kB: resident -= kFreedByB; break;
        case schedule::ActionKind::kW: resident -= kActivationBytes - kFreedByB; break;
        case schedule::ActionKind::kBW: resident -= kActivationBytes; break;
        default: break;
      }
      timing->set_bytes(schedule::IsCompute(t->action.kind) ? resident : 4096);
    }
  }
  return trace;
}

TEST(JobReportTest, ReplayAtTwiceTheDurationMeasuresTwiceTheStepTime) {
  for (const char* name : {"1f1b", "zb-h1", "v-half"}) {
    SCOPED_TRACE(name);
    const Planned planned = MakePlan(name, 4, 8);
    auto report = BuildJobReport(planned.plan, ReplayTrace(planned, 2.0));
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->job_id, "job-000042");
    EXPECT_EQ(report->step, 7);
    // The prediction is the plan's own (comm_s travels with the plan).
    EXPECT_DOUBLE_EQ(report->predicted.makespan, planned.sim.makespan);
    EXPECT_DOUBLE_EQ(report->predicted.makespan, planned.plan.prediction().makespan_s());
    // Times are rounded to whole ns: within 2 ns per action.
    EXPECT_NEAR(report->measured.makespan, 2 * planned.sim.makespan, 4e-9);
    EXPECT_NEAR(report->measured.bubble_ratio, planned.sim.bubble_ratio, 1e-6);
    for (int w = 0; w < 4; ++w) {
      EXPECT_DOUBLE_EQ(report->measured.peak_memory[w], report->predicted.peak_memory[w]);
      // Measured curve: a start point plus one point per compute action of the worker.
      int compute = 0;
      for (const auto& a : planned.schedule.worker_actions[w]) {
        compute += schedule::IsCompute(a.kind);
      }
      EXPECT_EQ(report->measured.memory_curve[w].size(), static_cast<size_t>(compute + 1));
      EXPECT_EQ(report->measured.memory_curve[w].front().units, 0);
      EXPECT_EQ(report->measured.memory_curve[w].back().units, 0);  // all freed by the end
    }
  }
}

// With CPU times in the trace, the report sets each compute group's CPU beside the plan's time
// for the same actions, and the transfers' CPU beside their wall time; without them, no line.
TEST(JobReportTest, CpuTimesAreSetBesideThePlansAndTheWallTime) {
  const Planned planned = MakePlan("1f1b", 2, 4);
  v1::StepTrace trace = ReplayTrace(planned, 2.0);
  absl::StatusOr<JobReport> without = BuildJobReport(planned.plan, trace);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(without->cpu_use.empty());
  EXPECT_EQ(FormatJobReport(*without).find("CPU time"), std::string::npos);
  // Every compute action 1.5 ms of CPU (the plan: F 1 ms, BW 2 ms), every transfer 10 us.
  int forwards = 0, backwards = 0, sends = 0, receives = 0;
  for (const auto& list : planned.schedule.worker_actions) {
    for (const schedule::Action& a : list) {
      forwards += a.kind == schedule::ActionKind::kF;
      backwards += a.kind == schedule::ActionKind::kBW;
      sends += schedule::IsSend(a.kind);
      receives += schedule::IsRecv(a.kind);
    }
  }
  ASSERT_EQ(forwards, 8);
  ASSERT_EQ(backwards, 8);
  for (v1::StepReport& rank : *trace.mutable_ranks()) {
    for (v1::ActionTiming& t : *rank.mutable_timings()) {
      const bool compute =
          t.action().kind() == v1::ACTION_KIND_F || t.action().kind() == v1::ACTION_KIND_BW;
      t.set_cpu_ns(compute ? 1'500'000 : 10'000);
    }
  }
  absl::StatusOr<JobReport> report = BuildJobReport(planned.plan, trace);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string text = FormatJobReport(*report);
  EXPECT_NE(text.find("CPU time in the actions (the ranks shown): F 12.000 ms = 1.50 x the plan's; "
                      "BW 12.000 ms = 0.75 x the plan's; sends " +
                      absl::StrFormat("%.3f ms in ", sends * 0.01)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrFormat("receives %.3f ms in ", receives * 0.01)), std::string::npos)
      << text;
}

TEST(JobReportTest, MeasuredCurveFollowsRecordedBytes) {
  // 1f1b, p = 2, m = 2: worker 1 (last stage) runs F0 BW0 F1 BW1: 1000, 0, 1000, 0.
  schedule::PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 2;
  const schedule::Schedule sched =
      *schedule::AddTransfers(*schedule::Generate("1f1b", spec));
  Planned planned{sched, schedule::CostModelFor(spec, 1), {}, {}};
  planned.costs.bytes_per_unit = 1;
  for (auto& s : planned.costs.stages) s.activation = kActivationBytes;
  planned.sim = *schedule::Simulate(sched, planned.costs);
  planned.plan = schedule::PlanToProto(sched, planned.costs, &planned.sim);
  auto report = BuildJobReport(planned.plan, ReplayTrace(planned, 1.0));
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<double> levels;
  for (const auto& pt : report->measured.memory_curve[1]) levels.push_back(pt.units);
  EXPECT_EQ(levels, (std::vector<double>{0, 1000, 0, 1000, 0}));  // 1f1b fuses B and W
  EXPECT_EQ(report->measured.peak_memory[1], 1000);
}

TEST(JobReportTest, RejectsTraceThatDoesNotMatchThePlan) {
  const Planned planned = MakePlan("1f1b", 2, 3);
  v1::StepTrace trace = ReplayTrace(planned, 1.0);
  v1::StepTrace missing_rank = trace;
  missing_rank.mutable_ranks()->RemoveLast();
  auto r1 = BuildJobReport(planned.plan, missing_rank);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r1.status().message().find("trace.ranks: 1 ranks reported, the plan has 2"),
            std::string::npos)
      << r1.status();

  v1::StepTrace swapped = trace;
  swapped.mutable_ranks(1)->mutable_timings(0)->mutable_action()->set_microbatch(2);
  auto r2 = BuildJobReport(planned.plan, swapped);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("trace.ranks[1].timings[0]"), std::string::npos)
      << r2.status();

  v1::StepTrace short_list = trace;
  short_list.mutable_ranks(0)->mutable_timings()->RemoveLast();
  auto r3 = BuildJobReport(planned.plan, short_list);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("trace.ranks[0].timings"), std::string::npos);
}

TEST(JobReportTest, SvgHasBothTimelinesAndAMemoryCurvePerWorker) {
  const Planned planned = MakePlan("zb-h1", 3, 6);
  auto report = BuildJobReport(planned.plan, ReplayTrace(planned, 1.5));
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string svg = RenderJobReportSvg(*report);
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count("<svg"), 4);  // outer + predicted + measured + memory
  EXPECT_EQ(count("</svg>"), 4);
  EXPECT_NE(svg.find("predicted (simulator, plan costs)"), std::string::npos);
  EXPECT_NE(svg.find("measured (step 7)"), std::string::npos);
  // Every compute action drawn twice (predicted and measured).
  int compute = 0;
  for (const auto& list : planned.schedule.worker_actions) {
    for (const auto& a : list) compute += schedule::IsCompute(a.kind);
  }
  // + 8 legend swatches per Gantt chart + the memory plot's frame.
  EXPECT_EQ(count("<rect x="), 2 * compute + 2 * 8 + 1);
  // 2 curves (predicted dashed, measured solid) per worker; legend names each worker once.
  EXPECT_EQ(count("<path"), 2 * 3);
  for (const char* w : {">worker 0<", ">worker 1<", ">worker 2<"}) {
    EXPECT_NE(svg.find(w), std::string::npos) << w;
  }
  EXPECT_NE(svg.find("measured/predicted 1.500"), std::string::npos);
}

// The trace's CPU time of every compute action `cpu_scale` x its wall time (others 5 us), and
// each rank's clock shifted by its own offset (ranks start their steps at different moments).
v1::StepTrace WithCpuAndOwnClocks(v1::StepTrace trace, double cpu_scale) {
  const int64_t offsets[] = {0, 3'000'017, 1'234'567, 50};
  for (int r = 0; r < trace.ranks_size(); ++r) {
    for (v1::ActionTiming& t : *trace.mutable_ranks(r)->mutable_timings()) {
      const v1::ActionKind k = t.action().kind();
      const bool compute = k == v1::ACTION_KIND_F || k == v1::ACTION_KIND_B ||
                           k == v1::ACTION_KIND_W || k == v1::ACTION_KIND_BW;
      t.set_cpu_ns(compute ? static_cast<int64_t>((t.end_ns() - t.start_ns()) * cpu_scale) : 5'000);
      t.set_start_ns(t.start_ns() + offsets[r % 4]);
      t.set_end_ns(t.end_ns() + offsets[r % 4]);
    }
  }
  return trace;
}

// A trace that replays the plan (each action at its simulated time, the ranks' clocks apart)
// gives back the plan's hop and costs, and so its step: exact up to the whole-ns times.
TEST(StepReplayTest, AReplayOfThePlanGivesBackItsHopCostsAndStep) {
  for (const char* name : {"1f1b", "zb-h1", "v-half"}) {
    SCOPED_TRACE(name);
    const Planned planned = MakePlan(name, 4, 8);
    const v1::StepTrace trace = WithCpuAndOwnClocks(ReplayTrace(planned, 1.0), 1.0);
    absl::StatusOr<std::pair<double, int>> hop = MeasuredHop(planned.schedule, trace);
    ASSERT_TRUE(hop.ok()) << hop.status();
    EXPECT_NEAR(hop->first, 0.0002, 2e-9);
    EXPECT_GT(hop->second, 4);
    absl::StatusOr<StepReplay> replay = ReplayStep(planned.schedule, planned.costs, trace, 0);
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_EQ(replay->hops_measured, hop->second);
    EXPECT_NEAR(replay->costs.comm, 0.0002, 2e-9);
    for (const schedule::StageCost& c : replay->costs.stages) {
      EXPECT_NEAR(c.f, 0.001 / planned.schedule.ChunksPerWorker(), 2e-9);
      EXPECT_NEAR(c.FusedBackward(), 0.002 / planned.schedule.ChunksPerWorker(), 4e-9);
    }
    EXPECT_NEAR(replay->step_s, planned.sim.makespan, 1e-7);
    // Four ranks on two cores: the shared-core simulation of the same costs.
    schedule::CoreSharing sharing{{0, 0, 0, 0}, {2.0}, {1, 1, 1, 1}};
    absl::StatusOr<double> shared =
        schedule::SimulateSharedCores(planned.schedule, replay->costs, sharing);
    ASSERT_TRUE(shared.ok()) << shared.status();
    absl::StatusOr<StepReplay> on_two = ReplayStep(planned.schedule, planned.costs, trace, 2);
    ASSERT_TRUE(on_two.ok()) << on_two.status();
    EXPECT_DOUBLE_EQ(on_two->step_s, *shared);
    EXPECT_GT(on_two->step_s, replay->step_s * 1.2);
    // With each message's CPU on the shared cores: the shared-core simulation with that term.
    schedule::StepCpuWork messages;
    messages.message_cpu_s = 0.0001;
    absl::StatusOr<double> shared_messages =
        schedule::SimulateSharedCores(planned.schedule, replay->costs, sharing, {}, messages);
    ASSERT_TRUE(shared_messages.ok()) << shared_messages.status();
    absl::StatusOr<StepReplay> with_messages =
        ReplayStep(planned.schedule, planned.costs, trace, 2, 1, 0.0001);
    ASSERT_TRUE(with_messages.ok()) << with_messages.status();
    EXPECT_EQ(with_messages->message_cpu_s, 0.0001);
    EXPECT_DOUBLE_EQ(with_messages->step_s, *shared_messages);
    EXPECT_GT(with_messages->step_s, on_two->step_s);
  }
}

// The replay's compute times are the CPU times, not the wall times: at twice the CPU, every F,
// B and W costs twice the plan's and the step is the plan simulated with those costs.
TEST(StepReplayTest, ComputeTimesAreTheActionsCpuTimes) {
  const Planned planned = MakePlan("zb-h1", 4, 8);
  const v1::StepTrace trace = WithCpuAndOwnClocks(ReplayTrace(planned, 1.0), 2.0);
  absl::StatusOr<StepReplay> replay = ReplayStep(planned.schedule, planned.costs, trace, 0);
  ASSERT_TRUE(replay.ok()) << replay.status();
  schedule::CostModel doubled = planned.costs;
  for (schedule::StageCost& c : doubled.stages) {
    c.f *= 2;
    c.b *= 2;
    c.w *= 2;
  }
  for (size_t i = 0; i < doubled.stages.size(); ++i) {
    EXPECT_NEAR(replay->costs.stages[i].f, doubled.stages[i].f, 4e-9);
    EXPECT_NEAR(replay->costs.stages[i].b, doubled.stages[i].b, 4e-9);
    EXPECT_NEAR(replay->costs.stages[i].w, doubled.stages[i].w, 4e-9);
  }
  const absl::StatusOr<schedule::SimResult> expected =
      schedule::Simulate(planned.schedule, doubled);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_NEAR(replay->step_s, expected->makespan, 1e-7);
}

TEST(StepReplayTest, ATraceWithoutCpuTimesIsRefusedNamingTheAction) {
  const Planned planned = MakePlan("1f1b", 2, 4);
  absl::StatusOr<StepReplay> replay =
      ReplayStep(planned.schedule, planned.costs, ReplayTrace(planned, 1.0), 2);
  ASSERT_FALSE(replay.ok());
  EXPECT_EQ(replay.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(replay.status().message().find("rank 0 reported no CPU time for 0F0"),
            std::string::npos)
      << replay.status();
}

// The report prints the replay only when asked for, and says why there is none.
TEST(StepReplayTest, TheReportPrintsTheReplayWhenAskedFor) {
  const Planned planned = MakePlan("1f1b", 4, 8);
  const v1::StepTrace trace = WithCpuAndOwnClocks(ReplayTrace(planned, 1.0), 1.0);
  absl::StatusOr<JobReport> plain = BuildJobReport(planned.plan, trace);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(FormatJobReport(*plain).find("replay"), std::string::npos);
  absl::StatusOr<JobReport> report = BuildJobReport(planned.plan, trace, 2.0);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->replay.has_value());
  const std::string text = FormatJobReport(*report);
  EXPECT_NE(text.find(absl::StrFormat("hop 0.200 ms, the mean over %d messages), the 4 ranks "
                                      "sharing 2 cores: %.3f ms (measured/replayed %.3f)",
                                      report->replay->hops_measured, report->replay->step_s * 1e3,
                                      report->measured.makespan / report->replay->step_s)),
            std::string::npos)
      << text;
  absl::StatusOr<JobReport> messages = BuildJobReport(planned.plan, trace, 2.0, 40e-6);
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_NE(FormatJobReport(*messages).find(
                "messages; each message 40 us of the cores' CPU, the planner's figure), "
                "the 4 ranks sharing 2 cores"),
            std::string::npos)
      << FormatJobReport(*messages);
  absl::StatusOr<JobReport> none = BuildJobReport(planned.plan, ReplayTrace(planned, 1.0), 2.0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_NE(FormatJobReport(*none).find("no replay: rank 0 reported no CPU time for 0F0"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain::client
