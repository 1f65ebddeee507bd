// `pipetrain trace JOB`: downloads a step's measured timeline from the coordinator and writes it
// as a Chrome trace (open in Perfetto or chrome://tracing; one track per worker, aligned at each
// worker's step start) or, with --json, as the raw StepTrace. Prints a one-line summary:
// measured step time and bubble against the plan's prediction.
//
// Thread-safety: not thread-safe (one command per process).
#ifndef PIPETRAIN_CLIENT_TRACE_COMMAND_H_
#define PIPETRAIN_CLIENT_TRACE_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/job_commands.h"
#include "pipetrain/v1/coordinator.pb.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::client {

struct TraceDocument {
  std::string document;  // Chrome trace JSON
  std::string summary;   // one line, newline-terminated
};

// The Chrome trace of `trace`, a step of `job` (whose plan gives the schedule).
absl::StatusOr<TraceDocument> RenderStepTrace(const v1::Job& job, const v1::StepTrace& trace);

// `step` -1: the newest kept step. `output` empty: the document goes to `out`, the summary to
// `err`; otherwise the document goes to the file and the summary to `out`.
absl::Status TraceCommand(const JobCommandOptions& options, const std::string& job_id, int step,
                          const std::string& output, std::ostream& out, std::ostream& err);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_TRACE_COMMAND_H_
