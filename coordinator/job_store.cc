#include "coordinator/job_store.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace pipetrain::coordinator {

std::string JobIdFromSequence(int64_t sequence) { return absl::StrFormat("job-%06d", sequence); }

std::optional<int64_t> SequenceFromJobId(const std::string& job_id) {
  constexpr absl::string_view kPrefix = "job-";
  if (!absl::StartsWith(job_id, kPrefix) || job_id.size() < kPrefix.size() + 6 ||
      job_id.size() > kPrefix.size() + 18) {
    return std::nullopt;
  }
  const absl::string_view digits = absl::string_view(job_id).substr(kPrefix.size());
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t sequence = 0;
  if (!absl::SimpleAtoi(digits, &sequence) || sequence <= 0) return std::nullopt;
  if (JobIdFromSequence(sequence) != job_id) return std::nullopt;  // no extra leading zeros
  return sequence;
}

}  // namespace pipetrain::coordinator
