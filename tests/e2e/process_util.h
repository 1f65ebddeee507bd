// Test-side names for common/subprocess.h (spawn, bounded waits, kill, free ports).
#ifndef PIPETRAIN_TESTS_E2E_PROCESS_UTIL_H_
#define PIPETRAIN_TESTS_E2E_PROCESS_UTIL_H_

#include "common/subprocess.h"

namespace pipetrain::testing {
using subprocess::FreePort;
using subprocess::Kill;
using subprocess::Process;
using subprocess::ReadFile;
using subprocess::Spawn;
using subprocess::TempDir;
using subprocess::WaitFor;
using subprocess::WaitForText;
}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_PROCESS_UTIL_H_
