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
#include "common/status_macros.h"

namespace pipetrain::client {

absl::Status LocalCommand(const LocalOptions& options, std::ostream& out, std::ostream& err) {
  v1::JobSpec spec = DefaultJobSpec();
  if (!options.job_file.empty()) {
    PT_ASSIGN_OR_RETURN(spec, LoadJobSpec(options.job_file));
  }
  if (!options.schedule.empty()) spec.mutable_parallelism()->set_schedule(options.schedule);
  if (options.workers > 0) spec.mutable_parallelism()->set_num_workers(options.workers);
  if (options.steps > 0) spec.mutable_training()->set_steps(options.steps);
  const int workers = spec.parallelism().num_workers();

  LocalClusterOptions cluster_options;
  cluster_options.workers = workers;
  cluster_options.dir = options.dir;
  cluster_options.emulate = options.emulate;
  PT_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(cluster_options));
  out << "coordinator on " << cluster->coordinator_address() << " (metrics "
      << cluster->coordinator_metrics_address() << "), " << workers
      << " workers; logs and database in " << cluster->dir() << "\n";

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
