// Shell (tests): run a command line (the pipetrain CLI, promtool, openssl) and keep its output.
#ifndef PIPETRAIN_TESTS_E2E_SHELL_H_
#define PIPETRAIN_TESTS_E2E_SHELL_H_

#include <string>

namespace pipetrain::testing {

// Runs `command` through /bin/sh; returns its exit code (-1 if it did not exit normally) and
// fills `output` with its stdout and stderr.
int Shell(const std::string& command, std::string* output);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_SHELL_H_
