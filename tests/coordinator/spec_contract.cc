#include "tests/coordinator/spec_contract.h"

#include "absl/strings/str_cat.h"
#include "planner/job_spec_validation.h"
#include "planner/planner.h"

namespace pipetrain::coordinator {
namespace {

// Small enough to plan in milliseconds, on the embedded task (a fuzzer runs thousands).
bool SmallEnoughToPlan(const v1::JobSpec& s) {
  const int64_t m = s.training().global_batch() / s.training().microbatch_size();
  return s.training().data().source() != "text" && s.parallelism().num_workers() <= 8 &&
         m <= 64 && s.model().num_layers() <= 64 && s.model().hidden() <= 256 &&
         s.model().seq_len() <= 64 && s.model().vocab_size() <= 4096 &&
         s.model().ffn_hidden() <= 1024 && s.training().microbatch_size() <= 16;
}

// "field.path: why" with a non-empty path of [a-z0-9_.[\]] characters.
bool NamesAField(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = message[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

SpecContractResult CheckSpecContract(const v1::JobSpec& spec) {
  SpecContractResult result;
  const absl::Status status = planner::ValidateJobSpec(spec);
  if (!status.ok()) {
    if (status.code() != absl::StatusCode::kInvalidArgument) {
      result.broken = absl::StrCat("validation answered ", status.ToString(),
                                   "; only OK or INVALID_ARGUMENT are allowed");
    } else if (!NamesAField(std::string(status.message()))) {
      result.broken = absl::StrCat("validation's message does not start with a field path: \"",
                                   status.message(), "\"");
    }
    return result;
  }
  result.valid = true;
  if (!SmallEnoughToPlan(spec)) return result;
  result.planned = true;
  const absl::StatusOr<planner::PlannedJob> plan = planner::PlanJob(spec);
  if (!plan.ok() && plan.status().code() != absl::StatusCode::kInvalidArgument &&
      plan.status().code() != absl::StatusCode::kResourceExhausted) {
    result.broken = absl::StrCat("planning a valid spec answered ", plan.status().ToString(),
                                 "; allowed: OK, INVALID_ARGUMENT, RESOURCE_EXHAUSTED");
  }
  return result;
}

}  // namespace pipetrain::coordinator
