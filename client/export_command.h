// `pipetrain export JOB [--step N] -o model.safetensors`: asks the coordinator for the job (its
// spec, checkpoint directory and plan), then gathers the checkpoint into one safetensors file
// (model_export.h). The checkpoint directory must be readable from the client's machine.
//
// Thread-safety: a free function.
#ifndef PIPETRAIN_CLIENT_EXPORT_COMMAND_H_
#define PIPETRAIN_CLIENT_EXPORT_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "client/job_commands.h"

namespace pipetrain::client {

// `step` 0: the job's newest complete checkpoint. Prints what it wrote to `out`.
absl::Status ExportCommand(const JobCommandOptions& options, const std::string& job_id,
                           int64_t step, const std::string& output, std::ostream& out);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_EXPORT_COMMAND_H_
