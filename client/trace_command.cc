#include "client/trace_command.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
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
  if (trace.ranks_size() != schedule.num_workers) {
    return absl::DataLossError(absl::StrCat("the trace of step ", trace.step(), " has ",
                                            trace.ranks_size(), " ranks; the plan has ",
                                            schedule.num_workers));
  }
  std::vector<std::vector<schedule::MeasuredAction>> timings;
  for (const v1::StepReport& report : trace.ranks()) {
    PT_ASSIGN_OR_RETURN(timings.emplace_back(), schedule::MeasuredActionsFromProto(report));
  }
  const schedule::SimResult measured = schedule::MeasuredTimeline(schedule, timings);
  TraceDocument doc;
  doc.document = schedule::RenderChromeTrace(schedule, measured, 1e6);
  const v1::Prediction& predicted = job.plan().prediction();
  doc.summary = absl::StrFormat(
      "%s step %d (%s, %d workers): measured %.4f s, bubble %.3f per stage, %.3f of the step; "
      "predicted %.4f s, bubble %.3f per stage, %.3f of the step; kept steps: %s\n",
      job.id(), trace.step(), schedule.name, schedule.num_workers, measured.makespan,
      measured.bubble_ratio, measured.step_bubble_ratio, predicted.makespan_s(),
      predicted.bubble_ratio(), predicted.step_bubble_ratio(),
      absl::StrJoin(trace.kept_steps(), ", "));
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
