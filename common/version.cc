#include "common/version.h"

#include "pipetrain_build_version.h"  // generated at build time: cmake/write_version.cmake

namespace pipetrain {

std::string VersionLine(const std::string& binary) {
  return binary + " " + PIPETRAIN_VERSION + " (git " + PIPETRAIN_GIT_REVISION + ")";
}

}  // namespace pipetrain
