// Job files: a JobSpec written as YAML or JSON, with the field names of job.proto
// (e.g. `training: {steps: 100, global_batch: 64}`). YAML is read with yaml-cpp and converted
// to JSON, then parsed by protobuf's JSON parser, so both formats accept exactly the same
// fields and unknown fields are errors naming the field.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_CLIENT_JOB_FILE_H_
#define PIPETRAIN_CLIENT_JOB_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::client {

// From text (`name` is used in error messages; a name ending in .json is parsed as JSON).
absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& name);
absl::StatusOr<v1::JobSpec> LoadJobSpec(const std::string& path);
// YAML rendering of a spec (for --print-default-job and templates): the fields that are set.
std::string JobSpecToYaml(const v1::JobSpec& spec);
// `spec` with every default filled in (model::WithDefaults) as YAML listing every field, zeros
// and empty strings included (`pipetrain local --print-default-job`: a template that shows all
// there is to set). Reads back as the filled-in spec.
std::string JobSpecToYamlWithEveryField(const v1::JobSpec& spec);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_JOB_FILE_H_
