#include "common/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace pipetrain::subprocess {

Process Spawn(const std::vector<std::string>& argv, const std::string& log_prefix) {
  Process p;
  p.stdout_path = log_prefix + ".out";
  p.stderr_path = log_prefix + ".err";
  p.pid = fork();
  if (p.pid == 0) {
    // A launcher may block signals it waits for; the child starts with a clean mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int out = open(p.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(p.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return p;
}

std::optional<int> WaitFor(const Process& process, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    pid_t r = waitpid(process.pid, &status, WNOHANG);
    if (r == process.pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(process.pid, SIGKILL);
  waitpid(process.pid, nullptr, 0);
  return std::nullopt;
}

void Kill(const Process& process, int signal) { kill(process.pid, signal); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WaitForText(const std::string& path, const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ReadFile(path).find(needle) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

namespace {

// True if 127.0.0.1:port can be bound now.
bool Bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Holds `port` against every other FreePort caller on this machine for the rest of this
// process's life: an flock on a file named after the port. Checking that a port binds is not
// enough: the caller binds it later (often in a child process), and tests running side by side,
// or two picks of one plan, can choose the same free port in between.
bool Reserve(int port) {
  static const std::string dir = [] {
    const std::string d = "/tmp/pipetrain-ports";
    if (::mkdir(d.c_str(), 0777) == 0) ::chmod(d.c_str(), 01777);  // shared by every user
    return d;
  }();
  const std::string path = absl::StrCat(dir, "/", port);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return true;  // cannot keep a record here: bindable is all we know
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;  // another process, or an earlier pick of this one, holds it
  }
  return true;  // fd stays open: the lock ends with the process
}

}  // namespace

int FreePort() {
  // Below the kernel's ephemeral range: a port handed out for bind(0) or taken by an outgoing
  // connection (tests make thousands) could be reused before the process meant to listen on it
  // binds it. Random, so that tests running side by side rarely try the same ones.
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int lo = 10000, hi = std::max(lo + 1000, ephemeral_low) - 1;
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  static std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = std::uniform_int_distribution<int>(lo, hi)(rng);
    if (Bindable(port) && Reserve(port)) return port;
  }
  // Everything tried was taken: let the kernel pick one.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string TempDir() {
  char tmpl[] = "/tmp/pipetrain-e2e-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir == nullptr ? "/tmp" : dir;
}

}  // namespace pipetrain::subprocess
