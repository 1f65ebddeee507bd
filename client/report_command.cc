#include "client/report_command.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report.h"
#include "common/status_macros.h"
#include "planner/planner.h"
#include "schedule/codec/plan_proto.h"

namespace pipetrain::client {

absl::Status ReportCommand(const JobCommandOptions& options, const std::string& job_id, int step,
                           const std::string& svg_file, std::ostream& out,
                           std::optional<double> replay_host_cores) {
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::Job job, client.Get(job_id));
  if (!job.has_plan() || job.plan().workers_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has no plan yet (state ", v1::JobState_Name(job.state()),
                     "); report needs a planned job with at least one completed step"));
  }
  PT_ASSIGN_OR_RETURN(v1::StepTrace trace, client.GetStepTrace(job_id, step));
  if (trace.job_id().empty()) trace.set_job_id(job_id);
  // The replay's per-message CPU: what the planner charges the job's messages on shared cores.
  double message_cpu_s = 0;
  if (replay_host_cores.has_value()) {
    absl::StatusOr<schedule::Schedule> schedule = schedule::ScheduleFromProto(job.plan());
    if (schedule.ok()) {
      absl::StatusOr<schedule::StepCpuWork> work =
          planner::StepCpuWorkOf(job.spec(), schedule->num_stages, planner::PlannerOptions{});
      if (work.ok()) message_cpu_s = work->message_cpu_s;
    }
  }
  PT_ASSIGN_OR_RETURN(JobReport report,
                      BuildJobReport(job.plan(), trace, replay_host_cores, message_cpu_s));
  const std::string path =
      svg_file.empty() ? absl::StrCat(job_id, "-step-", trace.step(), ".svg") : svg_file;
  std::ofstream file(path, std::ios::trunc);
  file << RenderJobReportSvg(report);
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  out << FormatJobReport(report);
  out << "kept steps: " << absl::StrJoin(trace.kept_steps(), " ") << "\n";
  out << "wrote " << path << "\n";
  return absl::OkStatus();
}

}  // namespace pipetrain::client
