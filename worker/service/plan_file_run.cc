#include "worker/service/plan_file_run.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/job_model.h"
#include "schedule/codec/plan_proto.h"
#include "schedule/measured_timeline.h"
#include "schedule/render_trace.h"
#include "worker/service/step_line.h"

namespace pipetrain::worker {

absl::Status RunFromPlanFile(const PlanFileRunConfig& config) {
  std::ifstream in(config.plan_path);
  if (!in) return absl::NotFoundError("--plan: cannot read " + config.plan_path);
  std::stringstream text;
  text << in.rdbuf();
  v1::PrepareRequest request;
  PT_RETURN_IF_ERROR(schedule::FromJson(text.str(), &request));
  // --rank is the job rank: with data parallelism, replica q's pipeline rank s is q * p + s.
  const int pipeline_ranks = request.plan().workers_size();
  if (pipeline_ranks > 0 && model::DataParallelSize(request.spec()) > 1) {
    const int job_ranks = model::DataParallelSize(request.spec()) * pipeline_ranks;
    if (config.rank < 0 || config.rank >= job_ranks) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--rank: %d is outside 0..%d (%d replicas of %d pipeline ranks)", config.rank,
          job_ranks - 1, job_ranks / pipeline_ranks, pipeline_ranks));
    }
    request.set_rank(config.rank % pipeline_ranks);
    request.set_replica(config.rank / pipeline_ranks);
  } else {
    request.set_rank(config.rank);
  }
  request.set_start_step(config.start_step);
  request.set_checkpoint_path(config.resume_from);
  const int steps =
      config.steps > 0 ? config.steps : request.spec().training().steps() - config.start_step;
  // The output paths are checked before the (long) session start: a typo must not cost a run.
  std::ofstream report;
  if (!config.report_path.empty()) {
    report.open(config.report_path);
    if (!report) return absl::InvalidArgumentError("--report: cannot write " + config.report_path);
  }
  if (!config.trace_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(config.trace_dir, error);
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace-dir: cannot create ", config.trace_dir, ": ", error.message()));
    }
  }
  PT_ASSIGN_OR_RETURN(auto session, WorkerSession::Create(request, config.session));

  const schedule::Schedule& sched = session->schedule();
  const int rank = config.rank;             // the job rank (step lines, file names)
  const int pipeline_rank = request.rank();  // its rank in the plan (the trace's lane)
  WorkerSession* s = session.get();
  return session->Run(steps, [&](const StepResult& r) {
    const std::string loss = r.loss ? absl::StrFormat("%.17g", *r.loss) : "null";
    const int64_t checkpoint = s->last_checkpoint_step() == r.step + 1 ? r.step + 1 : 0;
    std::string val_loss;
    if (r.validation.has_value()) {
      val_loss = r.validation->loss ? absl::StrFormat("%.17g", *r.validation->loss) : "null";
    }
    const std::string line =
        FormatStepLine({rank, r.step, loss, r.duration_ns / 1e6, r.peak_activation_bytes,
                        r.sent_bytes, checkpoint, val_loss});
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    if (report.is_open()) {
      std::string json = absl::StrFormat(
          "{\"rank\":%d,\"step\":%d,\"loss\":%s,\"duration_ns\":%d,"
          "\"peak_activation_bytes\":%d,\"sent_bytes\":%d,\"received_bytes\":%d,"
          "\"checkpoint_step\":%d,\"update_skipped\":%s,\"grad_norm\":%s,"
          "\"grad_clipped\":%s",
          rank, r.step, loss, r.duration_ns, r.peak_activation_bytes, r.sent_bytes,
          r.received_bytes, checkpoint, r.update_skipped ? "true" : "false",
          r.grad_norm && std::isfinite(*r.grad_norm) ? absl::StrFormat("%.17g", *r.grad_norm)
                                                     : "null",
          r.grad_clipped ? "true" : "false");
      // Data parallelism: each held stage's gradient sum across replicas (replica_reducer.h).
      if (!r.reduce_timings.empty()) {
        absl::StrAppend(&json, ",\"allreduce\":[");
        for (size_t i = 0; i < r.reduce_timings.size(); ++i) {
          const ReduceTiming& t = r.reduce_timings[i];
          absl::StrAppendFormat(&json,
                                "%s{\"stage\":%d,\"start_ns\":%d,\"end_ns\":%d,\"bytes\":%d}",
                                i > 0 ? "," : "", t.stage, t.start_ns, t.end_ns, t.bytes);
        }
        absl::StrAppend(&json, "]");
      }
      report << json << "}" << std::endl;
    }
    if (!config.trace_dir.empty()) {
      std::vector<std::vector<ActionTiming>> timings(sched.num_workers);
      timings[pipeline_rank] = r.timings;
      const std::string path =
          absl::StrFormat("%s/step-%d.rank-%d.trace.json", config.trace_dir, r.step, rank);
      std::ofstream trace(path);
      trace << schedule::RenderChromeTrace(sched, schedule::MeasuredTimeline(sched, timings));
      if (!trace) return absl::InternalError("--trace-dir: cannot write " + path);
    }
    return absl::OkStatus();
  });
}

}  // namespace pipetrain::worker
