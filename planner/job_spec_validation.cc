#include "planner/job_spec_validation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "schedule/generator.h"

namespace pipetrain::planner {

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  PT_RETURN_IF_ERROR(model::ValidateJobSpec(spec));
  const std::string& name = spec.parallelism().schedule();
  if (name.empty()) return absl::OkStatus();  // the default
  const std::vector<std::string> names = schedule::GeneratorNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallelism.schedule: \"", name, "\" is not allowed; allowed: ",
                     absl::StrJoin(names, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::planner
