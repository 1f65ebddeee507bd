// `pipetrain local` interrupted: a long job (100000 steps) is started as a real process; once its
// first progress line is out, SIGINT arrives, either at the whole process group (a terminal's
// Ctrl-C) or at the pipetrain process alone (kill -INT). It must cancel the job, stop its
// daemons, print "local cluster stopped" and exit with the cancelled code (4) within 30 s,
// leaving no pipetrain-coordinator or pipetrain-worker process behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/e2e/process_util.h"

namespace pipetrain {
namespace {

std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Live (non-zombie) processes whose command line contains `needle`, like `pgrep -f`.
std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == getpid()) continue;
    std::string cmdline = ReadProcFile(entry.path().string() + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (absl::StrContains(cmdline, needle)) found.push_back(pid);
  }
  return found;
}

// Children of `parent` with their command lines (from /proc/PID/stat's ppid field).
std::vector<std::pair<pid_t, std::string>> ChildrenOf(pid_t parent) {
  std::vector<std::pair<pid_t, std::string>> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const std::string stat = ReadProcFile(entry.path().string() + "/stat");
    const size_t paren = stat.rfind(')');  // "pid (comm) state ppid ..."
    if (paren == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(paren + 2), ' ');
    int ppid = 0;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &ppid) || ppid != parent) continue;
    std::string cmdline = ReadProcFile(entry.path().string() + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    children.emplace_back(pid, cmdline);
  }
  return children;
}

// Whether `pid` is still a live process running `cmdline` (not a zombie, not a reused pid).
bool StillRunning(pid_t pid, const std::string& cmdline) {
  std::string now = ReadProcFile(absl::StrCat("/proc/", pid, "/cmdline"));
  for (char& c : now) c = c == '\0' ? ' ' : c;
  return !now.empty() && now == cmdline;
}

// Starts `argv` as the leader of a new process group (as a shell starts a foreground job), with
// stdout/stderr to `log_prefix`.out/.err.
testing::Process SpawnGroupLeader(const std::vector<std::string>& argv,
                                  const std::string& log_prefix) {
  testing::Process p;
  p.stdout_path = log_prefix + ".out";
  p.stderr_path = log_prefix + ".err";
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  p.pid = fork();
  if (p.pid == 0) {
    setpgid(0, 0);
    const int out = open(p.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(p.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  if (p.pid > 0) setpgid(p.pid, p.pid);
  return p;
}

// Runs `pipetrain local` with a long job, interrupts it after the first progress line by
// `interrupt(pid)`, and checks the clean, cancelled shutdown.
void RunAndInterrupt(const std::function<void(pid_t)>& interrupt) {
  const std::string dir = testing::TempDir() + "/cluster";
  testing::Process local = SpawnGroupLeader(
      {PIPETRAIN_CLIENT_BIN, "local", "--steps", "100000", "--dir", dir, "--no-progress"},
      testing::TempDir() + "/pipetrain-local");
  ASSERT_GT(local.pid, 0);
  if (!testing::WaitForText(local.stdout_path, "step 1/100000", absl::Seconds(90))) {
    testing::Kill(local, SIGKILL);
    testing::WaitFor(local, absl::Seconds(5));
    FAIL() << "no progress line; stdout:\n"
           << testing::ReadFile(local.stdout_path) << "\nstderr:\n"
           << testing::ReadFile(local.stderr_path);
  }
  // The daemons it started: a coordinator and the workers.
  const std::vector<std::pair<pid_t, std::string>> daemons = ChildrenOf(local.pid);
  int coordinators = 0, workers = 0;
  for (const auto& [pid, cmdline] : daemons) {
    coordinators += absl::StrContains(cmdline, "pipetrain-coordinator");
    workers += absl::StrContains(cmdline, "pipetrain-worker");
  }
  EXPECT_EQ(coordinators, 1);
  EXPECT_GE(workers, 2);
  EXPECT_FALSE(ProcessesMentioning(dir).empty());  // the coordinator's --db path

  const absl::Time interrupted = absl::Now();
  interrupt(local.pid);
  const std::optional<int> code = testing::WaitFor(local, absl::Seconds(30));
  const std::string out = testing::ReadFile(local.stdout_path);
  const std::string err = testing::ReadFile(local.stderr_path);
  ASSERT_TRUE(code.has_value()) << "still running 30 s after SIGINT (killed)\n" << out << err;
  EXPECT_EQ(*code, 4) << out << err;  // ExitCodeFor(Cancelled)
  EXPECT_LT(absl::Now() - interrupted, absl::Seconds(30));
  EXPECT_TRUE(absl::StrContains(err, "interrupted: cancelling")) << err;
  EXPECT_TRUE(absl::StrContains(out, "CANCELLED")) << out;  // the job's final record
  EXPECT_TRUE(absl::StrContains(out, "local cluster stopped")) << out;

  // No daemon is left: each recorded pid is gone (or reaped and reused), and nothing mentions
  // the cluster directory (pgrep -f DIR).
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  bool left = true;
  while (left && absl::Now() < deadline) {
    left = !ProcessesMentioning(dir).empty();
    for (const auto& [pid, cmdline] : daemons) left = left || StillRunning(pid, cmdline);
    if (left) absl::SleepFor(absl::Milliseconds(100));
  }
  for (const auto& [pid, cmdline] : daemons) {
    EXPECT_FALSE(StillRunning(pid, cmdline)) << pid << " " << cmdline;
    if (StillRunning(pid, cmdline)) kill(pid, SIGKILL);
  }
  EXPECT_TRUE(ProcessesMentioning(dir).empty());
}

// A terminal's Ctrl-C: SIGINT to the whole foreground process group.
TEST(LocalInterruptTest, CtrlCToTheProcessGroupCancelsAndStopsEverything) {
  RunAndInterrupt([](pid_t pid) { kill(-pid, SIGINT); });
}

// `kill -INT PID` (a supervisor): SIGINT to pipetrain alone.
TEST(LocalInterruptTest, SigintToThePipetrainProcessCancelsAndStopsEverything) {
  RunAndInterrupt([](pid_t pid) { kill(pid, SIGINT); });
}

}  // namespace
}  // namespace pipetrain
