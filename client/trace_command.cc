#include "client/trace_command.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "planner/shared_host.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/measured_timeline.h"
#include "schedule/render_trace.h"

namespace pipetrain::client {

absl::StatusOr<TraceDocument> RenderStepTrace(const v1::Job& job, const v1::StepTrace& trace) {
  if (!job.has_plan() || job.plan().workers_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " has no plan with actions to draw the trace against"));
  }
  PT_ASSIGN_OR_RETURN(schedule::Schedule schedule, schedule::ScheduleFromProto(job.plan()));
  const int p = schedule.num_workers;
  // Data parallelism: d x p ranks, replica q's ranks q * p .. q * p + p - 1.
  const int d = std::max(1, job.plan().data_parallel());
  if (trace.ranks_size() != d * p) {
    return absl::DataLossError(absl::StrCat(
        "the trace of step ", trace.step(), " has ", trace.ranks_size(), " ranks; the plan has ",
        d > 1 ? absl::StrCat(d, " replicas x ", p) : absl::StrCat(p)));
  }
  std::vector<schedule::ReplicaTimeline> replicas(d);
  for (int q = 0; q < d; ++q) {
    std::vector<std::vector<schedule::MeasuredAction>> timings;
    int64_t origin = std::numeric_limits<int64_t>::max();
    for (int w = 0; w < p; ++w) {
      PT_ASSIGN_OR_RETURN(timings.emplace_back(),
                          schedule::MeasuredActionsFromProto(trace.ranks(q * p + w)));
      for (const schedule::MeasuredAction& a : timings.back()) {
        origin = std::min(origin, a.start_ns);
      }
    }
    replicas[q].sim = schedule::MeasuredTimeline(schedule, timings);
    if (origin == std::numeric_limits<int64_t>::max()) origin = 0;
    for (int w = 0; w < p; ++w) {
      for (const v1::GradientSum& g : trace.ranks(q * p + w).gradient_sums()) {
        replicas[q].gradient_sums.push_back(
            {w, g.stage(), (g.start_ns() - origin) * 1e-9, (g.end_ns() - origin) * 1e-9});
      }
    }
  }
  const schedule::SimResult& measured = replicas[0].sim;
  TraceDocument doc;
  doc.document = d > 1 ? schedule::RenderChromeTrace(schedule, replicas, 1e6)
                       : schedule::RenderChromeTrace(schedule, measured, 1e6);
  const v1::Prediction& predicted = job.plan().prediction();
  doc.summary = absl::StrFormat(
      "%s step %d (%s, %d workers%s): measured %.4f s, bubble %.3f per stage, %.3f of the step; "
      "predicted %.4f s, bubble %.3f per stage, %.3f of the step; kept steps: %s\n",
      job.id(), trace.step(), schedule.name, schedule.num_workers,
      d > 1 ? absl::StrFormat(" x %d replicas, replica 0's figures; each replica a process of "
                              "the trace with a gradient-sum track per worker",
                              d)
            : std::string(),
      measured.makespan, measured.bubble_ratio, measured.step_bubble_ratio,
      planner::ExpectedStepSeconds(predicted), predicted.bubble_ratio(),
      predicted.step_bubble_ratio(), absl::StrJoin(trace.kept_steps(), ", "));
  return doc;
}

absl::Status TraceCommand(const JobCommandOptions& options, const std::string& job_id, int step,
                          const std::string& output, std::ostream& out, std::ostream& err) {
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::StepTrace trace, client.GetStepTrace(job_id, step));
  std::string document, summary;
  if (options.json) {
    PT_ASSIGN_OR_RETURN(document, schedule::ToJson(trace));
    document += "\n";
  } else {
    PT_ASSIGN_OR_RETURN(v1::Job job, client.Get(job_id));
    PT_ASSIGN_OR_RETURN(TraceDocument rendered, RenderStepTrace(job, trace));
    document = std::move(rendered.document);
    summary = std::move(rendered.summary);
  }
  if (output.empty()) {
    out << document;
    err << summary;
    return absl::OkStatus();
  }
  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  file << document;
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("--output: cannot write \"", output, "\""));
  out << summary << "wrote the trace of step " << trace.step() << " to " << output << "\n";
  return absl::OkStatus();
}

}  // namespace pipetrain::client
