#include "client/job_commands.h"

#include <unistd.h>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/job_file.h"
#include "client/job_view.h"
#include "client/model_view.h"
#include "common/status_macros.h"
#include "schedule/codec/plan_proto.h"

namespace pipetrain::client {
namespace {

bool IsTerminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}

absl::Status PrintJson(const google::protobuf::Message& message, std::ostream& out) {
  PT_ASSIGN_OR_RETURN(std::string json, schedule::ToJson(message));
  out << json << "\n";
  return absl::OkStatus();
}

// One object per line, for streams (`watch --json`, `submit --watch --json`).
absl::Status PrintJsonLine(const google::protobuf::Message& message, std::ostream& out) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  out << json << "\n" << std::flush;
  return absl::OkStatus();
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return 0;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kResourceExhausted:
      return 2;
    case absl::StatusCode::kAborted:
      return 3;
    case absl::StatusCode::kCancelled:
      return 4;
    default:
      return 1;
  }
}

absl::Status JobOutcome(const v1::Job& job) {
  switch (job.state()) {
    case v1::JOB_STATE_SUCCEEDED:
      return absl::OkStatus();
    case v1::JOB_STATE_FAILED:
      return absl::AbortedError(absl::StrCat("job ", job.id(), " failed: ", job.failure_reason()));
    case v1::JOB_STATE_CANCELLED:
      return absl::CancelledError(absl::StrCat("job ", job.id(), " was cancelled"));
    default:
      return absl::UnknownError(
          absl::StrCat("job ", job.id(), " is still ", StateName(job.state())));
  }
}

absl::StatusOr<v1::Job> WatchJob(JobClient& client, const std::string& job_id, bool progress,
                                 std::ostream& human_out, std::ostream& err,
                                 std::ostream* json_events) {
  std::ostream& out = json_events != nullptr ? err : human_out;
  const bool tty = progress && isatty(STDERR_FILENO);
  v1::Job last;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  int printed_step = -1;
  absl::Status written;
  absl::Status status = client.Watch(job_id, [&](const v1::JobEvent& event) {
    if (json_events != nullptr) {
      written = PrintJsonLine(event, *json_events);
      if (!written.ok()) return false;
    }
    last = event.job();
    if (last.state() != state) {
      if (tty && printed_step >= 0) err << "\n";
      state = last.state();
      out << last.id() << " " << StateName(state)
          << (last.failure_reason().empty() ? "" : ": " + last.failure_reason()) << "\n";
      out.flush();
      printed_step = -1;
    }
    if (event.has_step() && last.steps_done() != printed_step) {
      const int total = std::max(1, last.spec().training().steps());
      if (tty) {
        err << "\r" << FormatProgress(last) << "   " << std::flush;
      } else if (last.steps_done() == 1 || last.steps_done() == total ||
                 last.steps_done() % std::max(1, total / 10) == 0) {
        out << FormatProgress(last) << "\n" << std::flush;
      }
      printed_step = last.steps_done();
    }
    return true;
  });
  if (tty && printed_step >= 0) err << "\n";
  if (!written.ok()) return written;
  if (!status.ok()) return status;
  // The stream ended with the job; fetch the final record (measurements included).
  PT_ASSIGN_OR_RETURN(v1::Job final_job, client.Get(job_id));
  if (!IsTerminal(final_job.state())) {
    return absl::UnavailableError(
        absl::StrCat("the watch of ", job_id, " ended while it is ", StateName(final_job.state())));
  }
  return final_job;
}

absl::Status SubmitCommand(const JobCommandOptions& options, const std::string& job_file,
                           bool watch, std::ostream& out, std::ostream& err) {
  PT_ASSIGN_OR_RETURN(v1::JobSpec spec, LoadJobSpec(job_file));
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::Job job, client.Submit(spec));
  if (options.json && !watch) return PrintJson(job, out);
  if (options.json) {  // stdout: JSON only, one object per line
    err << "submitted " << job.id() << "\n";
    PT_ASSIGN_OR_RETURN(v1::Job final_job,
                        WatchJob(client, job.id(), options.progress, out, err, &out));
    PT_RETURN_IF_ERROR(PrintJsonLine(final_job, out));
    return JobOutcome(final_job);
  }
  out << "submitted " << job.id() << "\n";
  if (!watch) return absl::OkStatus();
  PT_ASSIGN_OR_RETURN(v1::Job final_job, WatchJob(client, job.id(), options.progress, out, err));
  out << FormatJobStatus(final_job) << FormatLossCurve(final_job);
  return JobOutcome(final_job);
}

absl::Status ValidateCommand(const JobCommandOptions& options, const std::string& job_file,
                             std::ostream& out) {
  PT_ASSIGN_OR_RETURN(v1::JobSpec spec, LoadJobSpec(job_file));
  JobClient client(options.coordinator, options.token, options.tls);
  absl::StatusOr<v1::Plan> plan = client.Plan(spec);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(job_file, ": ", plan.status().message()));
  }
  if (options.json) return PrintJson(*plan, out);
  const int p = plan->workers_size();
  const v1::Prediction& pred = plan->prediction();
  out << job_file << ": valid (checked and planned by the coordinator at " << options.coordinator
      << "; nothing was submitted)\n"
      << "  " << FormatModelLine(spec) << "\n"
      << absl::StrFormat("  plan: %s on %d workers x %d chunks, %d microbatches\n",
                         plan->schedule(), p, p > 0 ? plan->num_stages() / p : 0,
                         plan->num_microbatches())
      << absl::StrFormat("  predicted step %.4f s, bubble ratio %.3f\n", pred.makespan_s(),
                         pred.bubble_ratio());
  out << "  predicted peak activation memory per worker (MiB):";
  for (int64_t bytes : pred.peak_activation_bytes()) {
    out << absl::StrFormat(" %.3f", bytes / 1048576.0);
  }
  out << "\n";
  if (!plan->explanation().empty()) out << "  " << plan->explanation() << "\n";
  return absl::OkStatus();
}

absl::Status WorkersCommand(const JobCommandOptions& options, std::ostream& out) {
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::ListWorkersResponse workers, client.ListWorkers());
  if (options.json) return PrintJson(workers, out);
  if (workers.workers().empty()) {
    out << "no workers registered\n";
    return absl::OkStatus();
  }
  out << absl::StrFormat("%-14s %-6s %-12s %-24s %-12s %-21s %s\n", "ID", "STATE", "JOB",
                         "DEVICE", "HOST", "ADDRESS", "HEARTBEAT");
  for (const v1::WorkerSummary& w : workers.workers()) {
    std::string device = absl::AsciiStrToLower(
        std::string(absl::StripPrefix(v1::DeviceKind_Name(w.device()), "DEVICE_KIND_")));
    if (!w.device_name().empty()) absl::StrAppend(&device, " ", w.device_name());
    out << absl::StrFormat("%-14s %-6s %-12s %-24s %-12s %-21s %.1f s ago\n", w.id(), w.state(),
                           w.job_id().empty() ? "-" : w.job_id(), device,
                           w.host().empty() ? "-" : w.host(), w.address(),
                           w.seconds_since_heartbeat());
  }
  return absl::OkStatus();
}

absl::Status StatusCommand(const JobCommandOptions& options, const std::string& job_id,
                           std::ostream& out) {
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::Job job, client.Get(job_id));
  if (options.json) return PrintJson(job, out);
  out << FormatJobStatus(job);
  return absl::OkStatus();
}

absl::Status ListCommand(const JobCommandOptions& options, const std::string& state,
                         std::ostream& out) {
  v1::JobState filter = v1::JOB_STATE_UNSPECIFIED;
  if (!state.empty() && !v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(state), &filter)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state: \"", state,
                     "\" is not one of queued, planning, waiting_for_workers, running, recovering, "
                     "succeeded, failed, cancelled"));
  }
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, client.List(filter));
  if (options.json) {
    v1::ListJobsResponse all;
    for (v1::Job& job : jobs) *all.add_jobs() = std::move(job);
    return PrintJson(all, out);
  }
  for (const v1::Job& job : jobs) out << FormatJobLine(job) << "\n";
  if (jobs.empty()) out << "no jobs\n";
  return absl::OkStatus();
}

absl::Status CancelCommand(const JobCommandOptions& options, const std::string& job_id,
                           std::ostream& out) {
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::Job job, client.Cancel(job_id));
  if (options.json) return PrintJson(job, out);
  out << job.id() << " " << StateName(job.state()) << "\n";
  return absl::OkStatus();
}

absl::Status WatchCommand(const JobCommandOptions& options, const std::string& job_id,
                          std::ostream& out, std::ostream& err) {
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(v1::Job job, WatchJob(client, job_id, options.progress, out, err,
                                            options.json ? &out : nullptr));
  if (options.json) {
    PT_RETURN_IF_ERROR(PrintJsonLine(job, out));
  } else {
    out << FormatJobStatus(job) << FormatLossCurve(job);
  }
  return JobOutcome(job);
}

}  // namespace pipetrain::client
