// The build's version: the project version (CMakeLists.txt) and the git revision it was built
// from ("-modified" when the tree had uncommitted changes), for every binary's --version.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COMMON_VERSION_H_
#define PIPETRAIN_COMMON_VERSION_H_

#include <string>

namespace pipetrain {

// "<binary> <version> (git <revision>)", e.g. "pipetrain-worker 0.5.0 (git 1a2b3c4d5e6f)".
std::string VersionLine(const std::string& binary);
// The parts: the project version ("0.5.0") and the git revision ("1a2b3c4d5e6f", with
// "-modified" for a tree with uncommitted changes, "unknown" outside git).
std::string ProjectVersion();
std::string GitRevision();

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_VERSION_H_
