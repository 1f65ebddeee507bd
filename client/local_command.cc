#include "client/local_command.h"

#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/default_job.h"
#include "client/job_client.h"
#include "client/job_commands.h"
#include "client/job_file.h"
#include "client/job_view.h"
#include "client/local_cluster.h"
#include "client/model_export.h"
#include "client/model_samples.h"
#include "common/status_macros.h"
#include "model/job_model.h"

namespace pipetrain::client {

namespace {

// The trained model exported from the job's newest checkpoint and, for the addition task, a few
// sampled additions; problems are reported in the text (the job itself succeeded).
std::string ExportAndSample(const v1::Job& job, const std::string& dir) {
  ExportRequest request;
  request.job_id = job.id();
  request.spec = job.spec();
  request.num_stages = job.plan().num_stages();
  request.step = job.checkpoint_step();
  request.output = dir + "/model.safetensors";
  absl::StatusOr<ExportResult> exported = ExportCheckpoint(request);
  if (!exported.ok()) {
    return absl::StrCat("\nexport: ", exported.status().message(), "\n");
  }
  std::string text = absl::StrCat("\nexported step ", exported->step, " to ", request.output,
                                  " (", exported->parameters, " parameters; `pipetrain generate "
                                  "--weights ", request.output, " --prompt ...`)\n");
  const std::string& source = job.spec().training().data().source();
  if (!source.empty() && source != "default") return text;
  absl::StatusOr<std::vector<AdditionSample>> samples = SampleAdditions(request.output, 6);
  if (!samples.ok()) {
    return absl::StrCat(text, "sampling: ", samples.status().message(), "\n");
  }
  return absl::StrCat(text, "sampled additions (greedy `pipetrain generate` on the export):\n",
                      FormatAdditionSamples(*samples));
}

}  // namespace

absl::Status LocalCommand(const LocalOptions& options, std::ostream& out, std::ostream& err) {
  v1::JobSpec spec = DefaultJobSpec();
  if (!options.job_file.empty()) {
    PT_ASSIGN_OR_RETURN(spec, LoadJobSpec(options.job_file));
  }
  if (!options.schedule.empty()) spec.mutable_parallelism()->set_schedule(options.schedule);
  if (options.workers > 0) spec.mutable_parallelism()->set_num_workers(options.workers);
  if (options.steps > 0) spec.mutable_training()->set_steps(options.steps);
  // One worker process per pipeline rank of every data-parallel replica.
  const int workers = model::TotalWorkers(spec);

  LocalClusterOptions cluster_options;
  cluster_options.workers = workers;
  cluster_options.dir = options.dir;
  cluster_options.emulate = options.emulate;
  PT_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(cluster_options));
  out << "coordinator on " << cluster->coordinator_address() << " (metrics "
      << cluster->coordinator_metrics_address() << "), " << workers
      << " workers; logs and database in " << cluster->dir() << "\n";

  // A job without checkpoints writes one after its last step, so that the trained model can be
  // exported and sampled below.
  const bool checkpoint_for_export = !options.emulate && spec.checkpoint().dir().empty();
  if (checkpoint_for_export) {
    spec.mutable_checkpoint()->set_dir(cluster->dir() + "/checkpoints");
    spec.mutable_checkpoint()->set_interval_steps(spec.training().steps());
  }

  JobClient client(cluster->coordinator_address(), "");
  PT_ASSIGN_OR_RETURN(v1::Job job, client.Submit(spec));
  out << "submitted " << job.id() << ": " << spec.name() << ", schedule "
      << spec.parallelism().schedule() << ", " << spec.training().steps() << " steps\n";
  out.flush();

  // Ctrl-C / SIGTERM / SIGHUP: cancel the job; the watch then ends and everything shuts down.
  // (The daemons lead their own process groups, so a terminal's Ctrl-C reaches only us.)
  std::atomic<bool> done{false};
  std::atomic<bool> interrupted{false};
  std::thread signals([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);  // sent below to end this thread
    int sig = 0;
    sigwait(&set, &sig);
    if (done) return;
    interrupted = true;
    err << "\ninterrupted: cancelling " << job.id() << "\n";
    JobClient canceller(cluster->coordinator_address(), "");
    (void)canceller.Cancel(job.id());
  });
  absl::StatusOr<v1::Job> final_job = WatchJob(client, job.id(), options.progress, out, err);
  done = true;
  pthread_kill(signals.native_handle(), SIGUSR1);
  signals.join();
  if (final_job.ok()) {
    out << "\n" << FormatJobStatus(*final_job) << FormatLossCurve(*final_job);
    if (final_job->state() == v1::JOB_STATE_SUCCEEDED && !options.emulate) {
      out << ExportAndSample(*final_job, cluster->dir());
    }
  }
  cluster->Stop();
  out << "local cluster stopped\n";
  if (!final_job.ok()) {
    // An interrupt is reported as one (exit code 4) even if the watch broke on the way.
    if (interrupted) {
      return absl::CancelledError(
          absl::StrCat("interrupted; ", job.id(), ": ", final_job.status().message()));
    }
    return final_job.status();
  }
  return JobOutcome(*final_job);
}

}  // namespace pipetrain::client
