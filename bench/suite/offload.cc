#include "absl/strings/str_cat.h"
#include "bench/suite/offload_hook.h"
#include "bench/suite/suite.h"

namespace pipetrain::bench {

std::vector<OffloadPoint> OffloadFrontierPoints(int /*p*/, int /*m*/) { return {}; }

std::string OffloadPendingNote() {
  return "not measured yet: the offload planner (coordinator/schedule/offload_*, issue 7) is not "
         "on main at this commit; bench/suite/offload.cc is the hook that will draw them.";
}

Section Offload(const SuiteOptions& options) {
  const Stamp now = Now();
  Section section;
  section.markdown = absl::StrCat(
      "## Offload: memory per worker vs stages, and step-time overhead\n\n",
      Provenance(options, now, now), "Pending: ", OffloadPendingNote(), "\n\n");
  return section;
}

}  // namespace pipetrain::bench
