// RenderStepTrace: a step's measured timings become a Chrome trace with one complete event per
// executed action on its worker's track, and the summary states the measured step time and bubble
// (exact for synthetic timings) next to the plan's prediction.
#include "client/trace_command.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/codec/plan_proto.h"
#include "schedule/cost_model.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"

namespace pipetrain::client {
namespace {

using ::testing::HasSubstr;

// A 1F1B job on 2 workers with 2 microbatches and its plan's prediction (unit costs, 1 ms).
v1::Job OneFOneBJob() {
  schedule::PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 2;
  schedule::Schedule s = schedule::Generate("1f1b", spec).value();
  schedule::CostModel costs = schedule::UniformCostModel(2, 1, 1e-3, 1e-3, 1e-3);
  schedule::SimResult sim = schedule::Simulate(s, costs).value();
  v1::Job job;
  job.set_id("job-000042");
  *job.mutable_plan() = schedule::PlanToProto(s, costs, &sim);
  return job;
}

// Every action of each worker back to back, 1 ms each, worker 1 starting 0.5 ms later.
v1::StepTrace BackToBack(const v1::Job& job, int step) {
  v1::StepTrace trace;
  trace.set_step(step);
  trace.add_kept_steps(0);
  trace.add_kept_steps(step);
  for (int w = 0; w < job.plan().workers_size(); ++w) {
    v1::StepReport* r = trace.add_ranks();
    r->set_rank(w);
    int64_t t = w * 500000;
    for (const v1::Action& a : job.plan().workers(w).actions()) {
      v1::ActionTiming* timing = r->add_timings();
      *timing->mutable_action() = a;
      timing->set_start_ns(t);
      t += 1000000;
      timing->set_end_ns(t);
    }
  }
  return trace;
}

TEST(RenderStepTraceTest, OneEventPerActionOnItsWorkersTrack) {
  const v1::Job job = OneFOneBJob();
  const v1::StepTrace trace = BackToBack(job, 5);
  TraceDocument doc = RenderStepTrace(job, trace).value();
  nlohmann::json parsed = nlohmann::json::parse(doc.document);
  int events[2] = {0, 0};
  double last_end_us[2] = {0, 0};
  for (const auto& e : parsed["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int tid = e["tid"];
    ASSERT_TRUE(tid == 0 || tid == 1);
    ++events[tid];
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.0);  // 1 ms in microseconds
    last_end_us[tid] = std::max(last_end_us[tid], e["ts"].get<double>() + 1000.0);
  }
  EXPECT_EQ(events[0], job.plan().workers(0).actions_size());
  EXPECT_EQ(events[1], job.plan().workers(1).actions_size());
  // Worker 1's track starts 0.5 ms after worker 0's.
  EXPECT_DOUBLE_EQ(last_end_us[1], 500.0 + 1000.0 * job.plan().workers(1).actions_size());

  // Only compute counts as busy; each worker's span is its own actions, 1 ms apiece; bubble as
  // the simulator defines it: 1 - busiest worker's compute / longest span.
  int compute[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    for (const v1::Action& a : job.plan().workers(w).actions()) {
      compute[w] += a.kind() == v1::ACTION_KIND_F || a.kind() == v1::ACTION_KIND_B ||
                    a.kind() == v1::ACTION_KIND_W || a.kind() == v1::ACTION_KIND_BW;
    }
  }
  EXPECT_EQ(compute[0], 4);  // 2 microbatches x (F, BW)
  const int n0 = job.plan().workers(0).actions_size(), n1 = job.plan().workers(1).actions_size();
  const double makespan_ms = std::max(1.0 * n0, 0.5 + n1);
  const double bubble = 1.0 - std::max(compute[0], compute[1]) / (1.0 * std::max(n0, n1));
  EXPECT_THAT(doc.summary, HasSubstr("job-000042 step 5 (1f1b, 2 workers)"));
  // The step bubble: 1 - all compute / (2 workers x the step, first start to last end).
  const double step_bubble = 1.0 - (compute[0] + compute[1]) / (2.0 * makespan_ms);
  EXPECT_THAT(doc.summary,
              HasSubstr(absl::StrFormat("measured %.4f s, bubble %.3f per stage, %.3f of the step;",
                                        makespan_ms * 1e-3, bubble, step_bubble)));
  EXPECT_THAT(doc.summary,
              HasSubstr(absl::StrFormat("predicted %.4f s", job.plan().prediction().makespan_s())));
  EXPECT_THAT(doc.summary, HasSubstr("kept steps: 0, 5"));
}

TEST(RenderStepTraceTest, RejectsTracesThatDoNotMatchThePlan) {
  const v1::Job job = OneFOneBJob();
  v1::StepTrace trace = BackToBack(job, 0);
  trace.mutable_ranks()->RemoveLast();
  EXPECT_THAT(RenderStepTrace(job, trace).status().message(), HasSubstr("1 ranks; the plan has 2"));
  trace = BackToBack(job, 0);
  trace.mutable_ranks(0)->mutable_timings(0)->mutable_action()->set_kind(
      static_cast<v1::ActionKind>(99));
  EXPECT_EQ(RenderStepTrace(job, trace).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Job no_plan;
  no_plan.set_id("job-000001");
  EXPECT_EQ(RenderStepTrace(no_plan, trace).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Data parallelism: 2 replicas of the 1F1B plan (4 ranks), each rank reporting its stage's
// gradient sum after its last action.
TEST(RenderStepTraceTest, ReplicasAreProcessesWithAGradientSumTrackPerWorker) {
  v1::Job job = OneFOneBJob();
  job.mutable_plan()->set_data_parallel(2);
  job.mutable_plan()->mutable_prediction()->add_stage_allreduce_s(2e-3);
  job.mutable_plan()->mutable_prediction()->add_stage_allreduce_s(2e-3);
  v1::StepTrace trace = BackToBack(job, 3);
  const v1::StepTrace one = trace;
  for (const v1::StepReport& r : one.ranks()) *trace.add_ranks() = r;  // replica 1, same times
  for (int r = 0; r < 4; ++r) {
    trace.mutable_ranks(r)->set_rank(r);
    v1::GradientSum* sum = trace.mutable_ranks(r)->add_gradient_sums();
    sum->set_stage(r % 2);
    const int64_t last = trace.ranks(r).timings(trace.ranks(r).timings_size() - 1).end_ns();
    sum->set_start_ns(last);
    sum->set_end_ns(last + (r < 2 ? 1000000 : 3000000));  // replica 0: 1 ms, replica 1: 3 ms
  }
  TraceDocument doc = RenderStepTrace(job, trace).value();
  nlohmann::json parsed = nlohmann::json::parse(doc.document);
  std::map<std::pair<int, int>, int> actions;  // (pid, tid) -> events
  std::vector<std::tuple<int, int, std::string, double>> sums;  // pid, tid, name, dur (us)
  std::set<std::string> names;
  for (const auto& e : parsed["traceEvents"]) {
    if (e["name"] == "thread_name") names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    if (e["cat"] == "gradient sum") {
      sums.emplace_back(e["pid"], e["tid"], e["name"], e["dur"]);
    } else {
      ++actions[{e["pid"], e["tid"]}];
    }
  }
  for (int pid = 0; pid < 2; ++pid) {
    for (int w = 0; w < 2; ++w) {
      EXPECT_EQ((actions[{pid, w}]), job.plan().workers(w).actions_size()) << pid << " " << w;
    }
  }
  EXPECT_TRUE(names.contains("worker 1: gradient sums")) << doc.document;
  ASSERT_EQ(sums.size(), 4u);
  // Worker w's sum (stage w) on track p + w of its replica's process.
  EXPECT_EQ(sums[0], std::make_tuple(0, 2, std::string("sum 0"), 1000.0));
  EXPECT_EQ(sums[3], std::make_tuple(1, 3, std::string("sum 1"), 3000.0));
  EXPECT_THAT(doc.summary, HasSubstr("2 workers x 2 replicas"));

  // The report: replica 0's timelines, each with a sum lane; the stage sums side by side.
  absl::StatusOr<JobReport> report = BuildJobReport(job.plan(), trace);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->replicas, 2);
  ASSERT_EQ(report->predicted_sums.size(), 2u);
  EXPECT_DOUBLE_EQ(report->predicted_sums[0].end - report->predicted_sums[0].start, 2e-3);
  ASSERT_EQ(report->measured_sums.size(), 2u);
  EXPECT_DOUBLE_EQ(report->measured_sums[1].end - report->measured_sums[1].start, 1e-3);
  EXPECT_THAT(FormatJobReport(*report),
              HasSubstr("gradient sums per stage, ms (predicted / measured on replica 0): s0 "
                        "2.000 / 1.000 s1 2.000 / 1.000"));
  const std::string svg = RenderJobReportSvg(*report);
  EXPECT_THAT(svg, HasSubstr("gradient sum of stage 1"));
  EXPECT_THAT(svg, HasSubstr("gradient sum across replicas"));
}

}  // namespace
}  // namespace pipetrain::client
