#include "client/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/secret.h"

namespace pipetrain::client {
namespace {

// The value printed after `prefix` on a line of `path` ("listening on 127.0.0.1:7070").
absl::StatusOr<std::string> ReadAnnounced(const subprocess::Process& process,
                                          const std::string& prefix, absl::Duration timeout,
                                          const std::string& what) {
  if (!subprocess::WaitForText(process.stdout_path, prefix, timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, " did not start within ", absl::FormatDuration(timeout),
        "; its log: ", process.stderr_path, "\n", subprocess::ReadFile(process.stderr_path)));
  }
  for (absl::string_view line : absl::StrSplit(subprocess::ReadFile(process.stdout_path), '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line.substr(prefix.size()));
  }
  return absl::InternalError("unreachable");
}

// subprocess::Spawn, but the child leads a process group of its own: a Ctrl-C at the
// terminal then reaches `pipetrain local` only (not its daemons), which cancels the job and
// stops the daemons in order.
subprocess::Process SpawnDaemon(const std::vector<std::string>& argv,
                                const std::string& log_prefix) {
  subprocess::Process p;
  p.stdout_path = log_prefix + ".out";
  p.stderr_path = log_prefix + ".err";
  std::vector<char*> args;  // built before fork: the child only makes async-signal-safe calls
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  p.pid = fork();
  if (p.pid == 0) {
    setpgid(0, 0);
    sigset_t none;  // the launcher blocks the signals it waits for; the child starts clean
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int out = open(p.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(p.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  if (p.pid > 0) setpgid(p.pid, p.pid);  // also here: whichever runs first wins the race
  return p;
}

}  // namespace

absl::StatusOr<std::string> FindBinary(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<fs::path> candidates = {self / name, self / ".." / "coordinator" / name,
                                      self / ".." / "worker" / name};
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      candidates.push_back(fs::path(std::string(dir)) / name);
    }
  }
  for (const fs::path& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c, ec).string();
  }
  return absl::NotFoundError(absl::StrCat("cannot find the ", name, " binary next to ",
                                          self.string(), ", in the build tree, or on PATH"));
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (options.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers: ", options.workers, " is not allowed; allowed: >= 1"));
  }
  std::string coordinator_bin = options.coordinator_bin;
  if (coordinator_bin.empty()) {
    auto found = FindBinary("pipetrain-coordinator");
    if (!found.ok()) return found.status();
    coordinator_bin = *found;
  }
  std::string worker_bin = options.worker_bin;
  if (worker_bin.empty()) {
    auto found = FindBinary("pipetrain-worker");
    if (!found.ok()) return found.status();
    worker_bin = *found;
  }
  auto cluster = std::unique_ptr<LocalCluster>(new LocalCluster());
  cluster->dir_ = options.dir.empty() ? subprocess::TempDir() : options.dir;
  std::filesystem::create_directories(cluster->dir_);

  // The daemons authenticate each other with a fresh cluster secret (docs/security.md): other
  // users of this machine can reach the loopback ports too.
  const std::string secret_file = cluster->dir_ + "/cluster-secret";
  {
    const int fd = open(secret_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const std::string secret = RandomToken();
    const bool written =
        fd >= 0 && write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
    if (fd >= 0) close(fd);
    if (!written) {
      return absl::UnavailableError(absl::StrCat("cannot write ", secret_file));
    }
  }
  std::vector<std::string> argv = {coordinator_bin,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--db",
                                   cluster->dir_ + "/pipetrain.db",
                                   "--cluster-secret-file",
                                   secret_file};
  argv.insert(argv.end(), options.coordinator_args.begin(), options.coordinator_args.end());
  cluster->coordinator_ = SpawnDaemon(argv, cluster->dir_ + "/coordinator");
  auto address =
      ReadAnnounced(cluster->coordinator_, "listening on ", absl::Seconds(30), "the coordinator");
  if (!address.ok()) return address.status();
  cluster->coordinator_address_ = *address;
  auto metrics =
      ReadAnnounced(cluster->coordinator_, "metrics on ", absl::Seconds(5), "the coordinator");
  if (metrics.ok()) cluster->metrics_address_ = *metrics;

  for (int r = 0; r < options.workers; ++r) {
    std::vector<std::string> wargv = {worker_bin,
                                      "--coordinator",
                                      cluster->coordinator_address_,
                                      "--name",
                                      absl::StrCat("local-worker-", r),
                                      "--metrics-listen",
                                      "127.0.0.1:0",
                                      "--cluster-secret-file",
                                      secret_file};
    if (options.emulate) wargv.push_back("--emulate");
    cluster->workers_.push_back(SpawnDaemon(wargv, absl::StrCat(cluster->dir_, "/worker-", r)));
  }
  for (int r = 0; r < options.workers; ++r) {
    auto m = ReadAnnounced(cluster->workers_[r], "metrics on ", absl::Seconds(30),
                           absl::StrCat("worker ", r));
    if (!m.ok()) return m.status();
    cluster->worker_metrics_.push_back(*m);
  }
  return cluster;
}

void LocalCluster::Stop(absl::Duration grace) {
  if (stopped_) return;
  stopped_ = true;
  for (const subprocess::Process& w : workers_) subprocess::Kill(w, SIGTERM);
  for (const subprocess::Process& w : workers_) subprocess::WaitFor(w, grace);
  if (coordinator_.pid > 0) {
    subprocess::Kill(coordinator_, SIGTERM);
    subprocess::WaitFor(coordinator_, grace);
  }
}

LocalCluster::~LocalCluster() { Stop(); }

}  // namespace pipetrain::client
