// pipetrain-worker: one pipeline worker process.
//
//   pipetrain-worker --plan job.plan.json --rank R [--steps N] [--emulate]
//                    [--trace-dir DIR] [--report FILE]
//
// The plan file is a pipetrain.v1.PrepareRequest in protobuf JSON (the same message the
// coordinator sends over gRPC): the job spec, the plan, and the address of every rank. The
// worker binds its own address, connects to its pipeline neighbours, runs the steps and prints
// one line per step. --report writes one JSON object per step; --trace-dir writes a Chrome trace
// of every step (open in Perfetto next to `pipetrain plan --format trace`).
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/strings/str_format.h"
#include "coordinator/schedule/codec/plan_proto.h"
#include "coordinator/schedule/render_trace.h"
#include "worker/runtime/measured_timeline.h"
#include "worker/runtime/worker_session.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "pipetrain-worker: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed tensor buffers in the heap: steady-state steps then reuse pages instead of
  // faulting in fresh mmaps for every activation and message.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  CLI::App app{"pipetrain-worker: runs one rank of a pipeline plan"};
  std::string plan_path, trace_dir, report_path;
  int rank = -1, steps = 0, blas_threads = 1;
  bool emulate = false;
  double connect_timeout_s = 30, recv_timeout_s = 60;
  app.add_option("--plan", plan_path, "PrepareRequest JSON (job spec, plan, peers)")->required();
  app.add_option("--rank", rank, "this worker's rank in the plan")->required();
  app.add_option("--steps", steps, "steps to run (default: the job's training.steps)");
  app.add_flag("--emulate", emulate,
               "EMULATED compute: sleep for the plan's predicted times (scale tests only)");
  app.add_option("--trace-dir", trace_dir, "write step-N.rank-R.trace.json per step here");
  app.add_option("--report", report_path, "write one JSON line per step here");
  app.add_option("--blas-threads", blas_threads, "OpenBLAS threads")->check(CLI::Range(1, 256));
  app.add_option("--connect-timeout", connect_timeout_s, "seconds to reach the neighbours");
  app.add_option("--recv-timeout", recv_timeout_s, "seconds to wait for any one tensor");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(plan_path);
  if (!in) return Fail(absl::NotFoundError("cannot read --plan " + plan_path));
  std::stringstream text;
  text << in.rdbuf();
  pipetrain::v1::PrepareRequest request;
  if (auto s = pipetrain::schedule::FromJson(text.str(), &request); !s.ok()) return Fail(s);
  request.set_rank(rank);
  if (steps <= 0) steps = request.spec().training().steps();

  pipetrain::worker::SessionOptions options;
  options.emulate = emulate;
  options.blas_threads = blas_threads;
  options.connect_timeout = absl::Seconds(connect_timeout_s);
  options.recv_timeout = absl::Seconds(recv_timeout_s);
  auto session = pipetrain::worker::WorkerSession::Create(request, options);
  if (!session.ok()) return Fail(session.status());

  std::ofstream report;
  if (!report_path.empty()) report.open(report_path);
  const auto& sched = (*session)->schedule();
  absl::Status status = (*session)->Run(steps, [&](const pipetrain::worker::StepResult& r) {
    std::string loss = r.loss ? absl::StrFormat("%.17g", *r.loss) : "null";
    std::printf("rank %d step %d loss %s time_ms %.1f peak_activation_bytes %lld sent_bytes %lld\n",
                rank, r.step, loss.c_str(), r.duration_ns / 1e6,
                static_cast<long long>(r.peak_activation_bytes),
                static_cast<long long>(r.sent_bytes));
    std::fflush(stdout);
    if (report.is_open()) {
      report << absl::StrFormat(
                    "{\"rank\":%d,\"step\":%d,\"loss\":%s,\"duration_ns\":%d,"
                    "\"peak_activation_bytes\":%d,\"sent_bytes\":%d,\"received_bytes\":%d}",
                    rank, r.step, loss, r.duration_ns, r.peak_activation_bytes, r.sent_bytes,
                    r.received_bytes)
             << std::endl;
    }
    if (!trace_dir.empty()) {
      std::vector<std::vector<pipetrain::worker::ActionTiming>> timings(sched.num_workers);
      timings[rank] = r.timings;
      std::ofstream trace(absl::StrFormat("%s/step-%d.rank-%d.trace.json", trace_dir, r.step, rank));
      trace << pipetrain::schedule::RenderChromeTrace(
          sched, pipetrain::worker::MeasuredTimeline(sched, timings));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return Fail(status);
  return 0;
}
