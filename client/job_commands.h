// The job subcommands of `pipetrain` against a running coordinator: submit, status, list,
// cancel, watch. Output goes to the given streams; errors come back as absl::Status, which
// main turns into exit codes (see ExitCodeFor).
//
// Thread-safety: not thread-safe (one command per process).
#ifndef PIPETRAIN_CLIENT_JOB_COMMANDS_H_
#define PIPETRAIN_CLIENT_JOB_COMMANDS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/job_client.h"

namespace pipetrain::client {

struct JobCommandOptions {
  std::string coordinator = "127.0.0.1:7070";
  std::string token;     // bearer token, when the coordinator requires one
  ClientTls tls;         // TLS to the coordinator (CA, optional client cert); empty: plaintext
  bool json = false;     // machine-readable output (protobuf JSON) on the read commands
  bool progress = true;  // watch: redraw one progress line on a terminal
};

// Exit codes a script can rely on: 0 success; 1 the coordinator could not be reached or
// another runtime failure; 2 bad input (bad job file, unknown job id); 3 the watched job
// FAILED; 4 it was CANCELLED.
int ExitCodeFor(const absl::Status& status);

// Statuses that carry the job's outcome for ExitCodeFor.
absl::Status JobOutcome(const v1::Job& job);

absl::Status SubmitCommand(const JobCommandOptions& options, const std::string& job_file,
                           bool watch, std::ostream& out, std::ostream& err);
// `pipetrain validate`: the coordinator checks and plans the job file (its PlanJob RPC, the
// same validation and planning as a submit, with its registered workers' measurements) and
// nothing is submitted. Prints the plan's summary, or with --json the Plan.
absl::Status ValidateCommand(const JobCommandOptions& options, const std::string& job_file,
                             std::ostream& out);
// `pipetrain workers`: the coordinator's registry, one line per worker (--json: the response).
absl::Status WorkersCommand(const JobCommandOptions& options, std::ostream& out);
absl::Status StatusCommand(const JobCommandOptions& options, const std::string& job_id,
                           std::ostream& out);
absl::Status ListCommand(const JobCommandOptions& options, const std::string& state,
                         std::ostream& out);
absl::Status CancelCommand(const JobCommandOptions& options, const std::string& job_id,
                           std::ostream& out);
// Follows the job to its end with a live progress line; returns JobOutcome of the final job.
// With options.json stdout holds only JSON: one line per event, then the final job on one line.
absl::Status WatchCommand(const JobCommandOptions& options, const std::string& job_id,
                          std::ostream& out, std::ostream& err);
// The watch loop on an existing client (used by `local`); returns the final job. State and
// progress lines go to `out`; with `json_events` set they go to `err` instead, and every event
// is written to `json_events` as one line of protobuf JSON (a JobEvent).
absl::StatusOr<v1::Job> WatchJob(JobClient& client, const std::string& job_id, bool progress,
                                 std::ostream& out, std::ostream& err,
                                 std::ostream* json_events = nullptr);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_JOB_COMMANDS_H_
