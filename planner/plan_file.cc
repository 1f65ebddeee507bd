#include "planner/plan_file.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/job_model.h"
#include "schedule/codec/plan_proto.h"

namespace pipetrain::planner {

absl::StatusOr<v1::PrepareRequest> MakePlanFile(const v1::JobSpec& spec, const v1::Plan& plan,
                                                const PlanFileOptions& options) {
  // Every worker of the job: d replicas of the plan's pipeline (job rank q * p + s).
  const int ranks = plan.workers_size() * model::DataParallelSize(spec);
  if (options.job_id.empty()) return absl::InvalidArgumentError("job_id: must not be empty");
  std::vector<std::string> addresses = options.addresses;
  if (addresses.empty()) {
    if (options.base_port < 1 || options.base_port + ranks - 1 > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "base_port: ", options.base_port, " is not allowed; allowed: 1..", 65536 - ranks,
          " (rank r listens on base_port + r, ", ranks, " ranks)"));
    }
    for (int r = 0; r < ranks; ++r) {
      addresses.push_back(absl::StrCat("127.0.0.1:", options.base_port + r));
    }
  }
  if (static_cast<int>(addresses.size()) != ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "addresses: ", addresses.size(), " given for a job of ", ranks, " workers (",
        model::DataParallelSize(spec), " data-parallel replica(s) x ", plan.workers_size(),
        " pipeline ranks); give one host:port per worker"));
  }
  for (const std::string& address : addresses) {
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("addresses: \"", address, "\" is not host:port (port 1..65535)"));
    }
  }
  v1::PrepareRequest request;
  request.set_job_id(options.job_id);
  *request.mutable_spec() = model::WithDefaults(spec);
  *request.mutable_plan() = plan;
  for (int r = 0; r < ranks; ++r) {
    v1::Peer* peer = request.add_peers();
    peer->set_rank(r);
    peer->set_address(addresses[r]);
  }
  return request;
}

absl::StatusOr<std::string> PlanFileJson(const v1::JobSpec& spec, const v1::Plan& plan,
                                         const PlanFileOptions& options) {
  PT_ASSIGN_OR_RETURN(const v1::PrepareRequest request, MakePlanFile(spec, plan, options));
  return schedule::ToJson(request);
}

}  // namespace pipetrain::planner
