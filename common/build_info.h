// The build-info series every pipetrain daemon exports, so dashboards and alerts can tell which
// build each process runs (e.g. a rollout half done):
//   pipetrain_build_info{program,version,revision} 1
// version: the project version; revision: the git revision (common/version.h).
//
// Thread-safety: as prometheus::Registry (thread-safe).
#ifndef PIPETRAIN_COMMON_BUILD_INFO_H_
#define PIPETRAIN_COMMON_BUILD_INFO_H_

#include <prometheus/registry.h>

#include <string>

namespace pipetrain {

// Adds the series for `program` (e.g. "pipetrain-coordinator") to `registry`.
void RegisterBuildInfo(prometheus::Registry& registry, const std::string& program);

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_BUILD_INFO_H_
