#include "client/export_command.h"

#include "absl/strings/str_cat.h"
#include "client/job_client.h"
#include "client/model_export.h"
#include "common/status_macros.h"

namespace pipetrain::client {

absl::Status ExportCommand(const JobCommandOptions& options, const std::string& job_id,
                           int64_t step, const std::string& output, std::ostream& out) {
  if (output.empty()) {
    return absl::InvalidArgumentError("--output (-o): required, e.g. -o model.safetensors");
  }
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--step: ", step, " is not allowed; allowed: >= 1 (a checkpoint step), or unset"));
  }
  JobClient client(options.coordinator, options.token, options.tls);
  PT_ASSIGN_OR_RETURN(const v1::Job job, client.Get(job_id));
  ExportRequest request;
  request.job_id = job.id();
  request.spec = job.spec();
  request.num_stages = job.plan().num_stages();
  request.output = output;
  // Default: the coordinator's committed checkpoint (every rank reported it).
  request.step = step > 0 ? step : job.checkpoint_step();
  if (request.step == 0 && !job.spec().checkpoint().dir().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        job.id(), " has no complete checkpoint yet (checkpoint.dir ", job.spec().checkpoint().dir(),
        ", every ", job.spec().checkpoint().interval_steps(), " steps)"));
  }
  PT_ASSIGN_OR_RETURN(const ExportResult result, ExportCheckpoint(request));
  out << "wrote " << output << ": " << result.tensors << " tensors, " << result.parameters
      << " parameters, step " << result.step << " of " << job.id() << "\n";
  if (!result.tokenizer_path.empty()) out << "wrote " << result.tokenizer_path << "\n";
  return absl::OkStatus();
}

}  // namespace pipetrain::client
