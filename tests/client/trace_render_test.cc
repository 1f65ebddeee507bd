// RenderStepTrace: a step's measured timings become a Chrome trace with one complete event per
// executed action on its worker's track, and the summary states the measured step time and bubble
// (exact for synthetic timings) next to the plan's prediction.
#include "client/trace_command.h"

#include "absl/strings/str_format.h"
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

}  // namespace
}  // namespace pipetrain::client
