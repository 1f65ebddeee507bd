// The CPU one cross-worker message costs, all threads together: two processes on loopback play
// ping-pong over TcpTransport with tensors of one size (a sender's compute thread queues it, the
// writer thread frames and writes it, the receiver's reader thread reads it into the mailbox and
// the receiver's compute thread takes it), one message in flight at a time as in a pipeline, so
// every message pays its wake-ups. CPU = user + system time of both processes (getrusage) over
// the timed round trips / messages; hop = wall time / messages. A least-squares line over the
// sizes gives `fixed + bytes / rate`: the planner's per-message CPU term of the shared-core step
// (schedule/step_cpu_work.h, PlannerOptions::message_cpu_*). Best (least CPU) of --repeats runs
// per size, sizes interleaved. Output: a Markdown table and the fit.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/heap_policy.h"
#include "worker/transport/tcp_transport.h"

namespace pipetrain::worker {
namespace {

constexpr int kWarmup = 20;

double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

struct Run {
  double cpu_per_message_s = 0;
  double hop_s = 0;
};

// `rounds` timed round trips of `bytes` each way: rank 0 sends, rank 1 answers with the same size.
Run PingPong(int64_t bytes, int rounds) {
  auto l0 = TcpListener::Bind("127.0.0.1", 0);
  auto l1 = TcpListener::Bind("127.0.0.1", 0);
  if (!l0.ok() || !l1.ok()) std::abort();
  TcpTransportOptions options;
  options.addresses = {absl::StrCat("127.0.0.1:", (*l0)->port()),
                       absl::StrCat("127.0.0.1:", (*l1)->port())};
  const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
  auto message = [elements](int32_t mb, TensorRole role) {
    Message m;
    m.key = MessageKey{0, 0, mb, role};
    m.shape = {elements};
    m.data.assign(elements, 1.5f);
    return m;
  };
  // The child's CPU is read from inside it (after its warm-up) and written to a pipe.
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) std::abort();
  pid_t child = fork();
  if (child == 0) {
    close(pipe_fd[0]);
    options.rank = 1;
    options.peers = {0};
    auto t = TcpTransport::Connect(options, std::move(*l1));
    if (!t.ok()) _exit(1);
    double cpu0 = 0;
    for (int i = 0; i < rounds + kWarmup; ++i) {
      if (i == kWarmup) cpu0 = CpuSeconds(RUSAGE_SELF);
      auto got =
          (*t)->Recv(0, MessageKey{0, 0, i, TensorRole::kActivation}, absl::InfiniteFuture());
      if (!got.ok()) _exit(2);
      (*t)->Recycle(std::move(got->data));
      if (!(*t)->Send(0, message(i, TensorRole::kGradient)).ok()) _exit(3);
    }
    (void)(*t)->Flush(absl::InfiniteFuture());
    const double cpu = CpuSeconds(RUSAGE_SELF) - cpu0;
    if (write(pipe_fd[1], &cpu, sizeof(cpu)) != sizeof(cpu)) _exit(4);
    _exit(0);
  }
  close(pipe_fd[1]);
  options.rank = 0;
  options.peers = {1};
  auto t = TcpTransport::Connect(options, std::move(*l0));
  if (!t.ok()) std::abort();
  double cpu0 = 0;
  absl::Time start;
  for (int i = 0; i < rounds + kWarmup; ++i) {
    if (i == kWarmup) {
      cpu0 = CpuSeconds(RUSAGE_SELF);
      start = absl::Now();
    }
    if (!t.value()->Send(1, message(i, TensorRole::kActivation)).ok()) std::abort();
    auto got =
        t.value()->Recv(1, MessageKey{0, 0, i, TensorRole::kGradient}, absl::InfiniteFuture());
    if (!got.ok()) std::abort();
    t.value()->Recycle(std::move(got->data));
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu = CpuSeconds(RUSAGE_SELF) - cpu0;
  double child_cpu = 0;
  if (read(pipe_fd[0], &child_cpu, sizeof(child_cpu)) != sizeof(child_cpu)) std::abort();
  close(pipe_fd[0]);
  waitpid(child, nullptr, 0);
  // (The message construction above is the sender's copy into a fresh tensor, which a stage's
  // output is anyway; it is inside the timed loop on both sides, as in a step.)
  return Run{(cpu + child_cpu) / (2.0 * rounds), wall / (2.0 * rounds)};
}

}  // namespace
}  // namespace pipetrain::worker

int main(int argc, char** argv) {
  pipetrain::KeepFreedMemoryInHeap();
  int repeats = 5, rounds = 2000;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  const std::vector<int64_t> sizes = {4 << 10, 32 << 10, 128 << 10, 512 << 10};
  std::vector<pipetrain::worker::Run> best(sizes.size());
  for (auto& b : best) b.cpu_per_message_s = 1e9;
  for (int r = 0; r < repeats; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const pipetrain::worker::Run run = pipetrain::worker::PingPong(sizes[i], rounds);
      if (run.cpu_per_message_s < best[i].cpu_per_message_s) best[i] = run;
    }
  }
  std::printf(
      "| message bytes | CPU per message (us, all threads) | hop (us, wall / messages) |\n");
  std::printf("|---|---|---|\n");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double x = static_cast<double>(sizes[i]), y = best[i].cpu_per_message_s;
    std::printf("| %lld | %.1f | %.1f |\n", static_cast<long long>(sizes[i]), y * 1e6,
                best[i].hop_s * 1e6);
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(sizes.size());
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double fixed = (sy - slope * sx) / n;
  std::printf(
      "\nfit: CPU per message = %.1f us + bytes / %.2f GB/s (best of %d runs of %d round "
      "trips per size)\n",
      fixed * 1e6, slope > 0 ? 1e-9 / slope : 0.0, repeats, rounds);
  return 0;
}
