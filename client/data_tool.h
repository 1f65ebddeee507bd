// `pipetrain data ...` and `pipetrain generate ...`: run the `pipetrain-data` binary (client/pipetrain_data_main.cc) in place
// of this process with the arguments after `data`. The data tool is a binary of its own because
// it links libsentencepiece, which must not share a process with protobuf
// (client/sentencepiece_tokenizer.h).
//
// Thread-safety: call from a single-threaded main only (it replaces the process).
#ifndef PIPETRAIN_CLIENT_DATA_TOOL_H_
#define PIPETRAIN_CLIENT_DATA_TOOL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pipetrain::client {

// Finds pipetrain-data (beside this executable, in the build tree, or on PATH; see FindBinary)
// and execs it with `args`. Returns only on failure: NotFound when the binary is missing,
// Internal when it cannot be run.
absl::Status ExecDataTool(const std::vector<std::string>& args);

// The same for any sibling binary, e.g. `pipetrain generate` runs pipetrain-generate (a
// worker-side binary: it computes).
absl::Status ExecTool(const std::string& binary_name, const std::vector<std::string>& args);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_DATA_TOOL_H_
