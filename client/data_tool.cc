#include "client/data_tool.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"

namespace pipetrain::client {

absl::Status ExecDataTool(const std::vector<std::string>& args) {
  return ExecTool("pipetrain-data", args);
}

absl::Status ExecTool(const std::string& binary_name, const std::vector<std::string>& args) {
  absl::StatusOr<std::string> binary = FindBinary(binary_name);
  if (!binary.ok()) return binary.status();
  std::vector<char*> argv = {binary->data()};
  std::vector<std::string> copies = args;  // execv takes char*
  for (std::string& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(binary->c_str(), argv.data());
  return absl::InternalError(absl::StrCat("cannot run ", *binary, ": ", std::strerror(errno)));
}

}  // namespace pipetrain::client
