// pipetrain-coordinator: parses flags (the only place that does) into a CoordinatorConfig, starts
// the Coordinator and serves until SIGTERM or SIGINT, then shuts down cleanly and exits 0.
// The first stdout line is "listening on HOST:PORT" (the chosen port when --listen asks for port
// 0), the second "metrics on HOST:PORT" (unless --metrics-listen is empty).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "common/heap_policy.h"
#include "common/secret.h"
#include "common/version.h"
#include "coordinator/coordinator.h"
#include "glog/logging.h"

int main(int argc, char** argv) {
  pipetrain::KeepFreedMemoryInHeap();  // plans of megabytes, built and dropped per job
  pipetrain::coordinator::CoordinatorConfig config;
  double heartbeat_timeout_s = 3;
  double prepare_timeout_s = 120;
  double job_metrics_retention_s = 600;
  CLI::App app{"pipetrain coordinator: plans, dispatches and watches pipeline-parallel jobs"};
  app.set_version_flag("--version", pipetrain::VersionLine("pipetrain-coordinator"));
  app.add_option("--listen", config.listen, "gRPC address (host:port; port 0 picks one)")
      ->capture_default_str();
  app.add_option("--metrics-listen", config.metrics_listen,
                 "Prometheus /metrics address (host:port; port 0 picks one; empty: none)")
      ->capture_default_str();
  app.add_option("--db", config.db_path, "SQLite job database file")->capture_default_str();
  app.add_option("--heartbeat-timeout-s", heartbeat_timeout_s,
                 "a worker without a heartbeat for this long is lost")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--prepare-timeout-s", prepare_timeout_s,
                 "deadline of a worker's Prepare (building chunks, connecting to peers)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--job-metrics-retention-s", job_metrics_retention_s,
                 "a job's Prometheus series are removed this long after it ends (0: at the next "
                 "scrape)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30.0 * 24 * 3600));
  app.add_option("--auth-token", config.auth_token,
                 "require \"authorization: Bearer <token>\" on JobService calls");
  std::string cluster_secret_file;
  app.add_option("--cluster-secret-file", cluster_secret_file,
                 "file holding the cluster secret workers must register with (else the "
                 "PIPETRAIN_CLUSTER_SECRET environment variable; neither: workers are not "
                 "authenticated, see docs/security.md)");
  app.add_option("--tls-cert", config.tls_cert_file,
                 "certificate (PEM) served, and presented to workers (which are then called "
                 "over TLS); enables TLS");
  app.add_option("--tls-key", config.tls_key_file, "private key (PEM) of --tls-cert");
  app.add_option("--tls-client-ca", config.tls_client_ca_file,
                 "CA (PEM) that client and worker certificates must chain to (mutual TLS); "
                 "also verifies the workers' servers");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<std::string> cluster_secret =
      pipetrain::LoadSecret(cluster_secret_file, "PIPETRAIN_CLUSTER_SECRET",
                            "--cluster-secret-file");
  if (!cluster_secret.ok()) {
    std::cerr << "pipetrain-coordinator: " << cluster_secret.status().message() << "\n";
    return 2;
  }
  config.cluster_secret = *std::move(cluster_secret);
  config.heartbeat_timeout = absl::Seconds(heartbeat_timeout_s);
  config.jobs.dispatch.prepare_timeout = absl::Seconds(prepare_timeout_s);
  config.job_metrics_retention = absl::Seconds(job_metrics_retention_s);

  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  // Block the signals in every thread (the servers' threads inherit this) and wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<pipetrain::coordinator::Coordinator>> coordinator =
      pipetrain::coordinator::Coordinator::Start(config);
  if (!coordinator.ok()) {
    std::cerr << "pipetrain-coordinator: " << coordinator.status() << "\n";
    return 1;
  }
  std::cout << "listening on " << (*coordinator)->address() << "\n";
  if (!(*coordinator)->metrics_address().empty()) {
    std::cout << "metrics on " << (*coordinator)->metrics_address() << "\n";
  }
  std::cout << std::flush;

  int signal = 0;
  sigwait(&signals, &signal);
  LOG(INFO) << "coordinator: signal " << signal << ", shutting down";
  (*coordinator)->Shutdown();
  coordinator->reset();
  LOG(INFO) << "coordinator: stopped";
  return 0;
}
