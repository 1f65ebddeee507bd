#include "common/version.h"

#include "pipetrain_build_version.h"  // generated at build time: cmake/write_version.cmake

namespace pipetrain {

std::string VersionLine(const std::string& binary) {
  return binary + " " + ProjectVersion() + " (git " + GitRevision() + ")";
}

std::string ProjectVersion() { return PIPETRAIN_VERSION; }

std::string GitRevision() { return PIPETRAIN_GIT_REVISION; }

}  // namespace pipetrain
