// `pipetrain report JOB`: fetches a finished (or running) job's plan and one kept step's
// measured trace from the coordinator, writes the predicted-vs-measured SVG (client/report.h)
// and prints the summary.
//
// Thread-safety: not thread-safe (one command per process).
#ifndef PIPETRAIN_CLIENT_REPORT_COMMAND_H_
#define PIPETRAIN_CLIENT_REPORT_COMMAND_H_

#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/job_commands.h"

namespace pipetrain::client {

// `step` -1: the newest step the coordinator kept. `svg_file` empty: "<job>-step-<N>.svg".
// `replay_host_cores` set: also print the step replayed with its own costs (client/step_replay.h).
absl::Status ReportCommand(const JobCommandOptions& options, const std::string& job_id, int step,
                           const std::string& svg_file, std::ostream& out,
                           std::optional<double> replay_host_cores = std::nullopt);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_REPORT_COMMAND_H_
