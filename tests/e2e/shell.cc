#include "tests/e2e/shell.h"

#include <sys/wait.h>

#include <cstdio>

namespace pipetrain::testing {

int Shell(const std::string& command, std::string* output) {
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  output->clear();
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output->append(buf, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace pipetrain::testing
