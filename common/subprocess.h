// Child processes for launchers and end-to-end tests: spawn a binary with
// stdout/stderr captured to files, bounded waits, kill, and free loopback ports.
// Thread-safety: the functions are thread-safe; a Process is a plain value.
#ifndef PIPETRAIN_COMMON_SUBPROCESS_H_
#define PIPETRAIN_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pipetrain::subprocess {

struct Process {
  pid_t pid = -1;
  std::string stdout_path;
  std::string stderr_path;
};

// Starts `argv` with stdout and stderr redirected to `log_prefix`.out / .err.
Process Spawn(const std::vector<std::string>& argv, const std::string& log_prefix);
// Exit code, or nullopt if it did not exit within `timeout` (it is then killed).
std::optional<int> WaitFor(const Process& process, absl::Duration timeout);
void Kill(const Process& process, int signal);
std::string ReadFile(const std::string& path);
// Waits until `path` contains `needle` (polling), up to `timeout`.
bool WaitForText(const std::string& path, const std::string& needle, absl::Duration timeout);
// A loopback port that was free a moment ago, chosen at random below the ephemeral port range
// and reserved until this process exits: no other FreePort caller on the machine (another test,
// or this one) is handed it meanwhile.
int FreePort();
// A fresh temporary directory.
std::string TempDir();

}  // namespace pipetrain::subprocess

#endif  // PIPETRAIN_COMMON_SUBPROCESS_H_
