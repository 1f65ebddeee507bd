// pipetrain-worker: one pipeline worker process. Two modes:
//
//   pipetrain-worker --coordinator HOST:PORT [--listen ADDR] [--transport-listen ADDR]
//                    [--metrics-listen ADDR] [--name NAME] [--tls-cert PEM --tls-key PEM
//                    [--tls-ca PEM]]
//       the daemon: registers with the coordinator and runs the jobs it dispatches.
//   pipetrain-worker --plan job.plan.json --rank R [--steps N] [--trace-dir DIR] [--report FILE]
//                    [--resume-from CKPT_DIR --start-step N]
//       one rank of a plan file, without a coordinator (testing and debugging the runtime);
//       --resume-from loads CKPT_DIR/step-N (written with the spec's checkpoint settings).
//       With data parallelism (d replicas of p ranks) R is the job rank: replica R / p, pipeline
//       rank R % p; --report lines then carry each stage's gradient sum ("allreduce").
//
// --device auto|cpu|cuda|cuda:N (either mode; default auto): where the stage compute runs. auto
// takes the first CUDA device when one is usable and otherwise the CPU, logging why; an
// explicit cuda choice that cannot be met exits with the reason (exit code 1).
// --emulate (either mode) replaces compute by sleeping for the plan's predicted times: EMULATED,
// for scale tests only. Flags are parsed here and nowhere else.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "glog/logging.h"
#include "common/heap_policy.h"
#include "common/secret.h"
#include "common/version.h"
#include "worker/device/device_list.h"
#include "worker/device/device_selection.h"
#include "worker/service/host_memory.h"
#include "worker/service/plan_file_run.h"
#include "worker/service/worker_daemon.h"

int main(int argc, char** argv) {
  // Block termination signals in every thread; the daemon waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Steady-state steps reuse freed tensor buffers' pages instead of faulting in fresh mmaps for
  // every activation and message.
  pipetrain::KeepFreedMemoryInHeap();
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  CLI::App app{
      "pipetrain-worker: runs pipeline ranks (daemon with --coordinator, or one rank of "
      "a plan file with --plan)"};
  app.set_version_flag("--version", pipetrain::VersionLine("pipetrain-worker"));
  pipetrain::worker::WorkerDaemonConfig daemon;
  pipetrain::worker::PlanFileRunConfig plan;
  pipetrain::worker::SessionOptions session;
  double connect_timeout_s = 30, recv_timeout_s = 60, job_metrics_retention_s = 600;
  std::string device = "auto";
  app.add_option("--coordinator", daemon.coordinator, "daemon mode: coordinator host:port");
  app.add_option("--listen", daemon.listen, "daemon: Worker gRPC address")->capture_default_str();
  app.add_option("--transport-listen", daemon.transport_listen, "daemon: tensor transport address")
      ->capture_default_str();
  app.add_option("--metrics-listen", daemon.metrics_listen,
                 "daemon: Prometheus address (empty disables)")
      ->capture_default_str();
  app.add_option("--name", daemon.name, "daemon: stable worker name (default worker-PID)");
  app.add_option("--host", daemon.host,
                 "daemon: host label reported at registration (default: the hostname). Workers "
                 "with one label share that machine's cores and GPUs in the coordinator's view "
                 "(Kubernetes: the node name shows which CPU pods share a node; docs/gpu.md "
                 "uses distinct labels to run NCCL ranks on one GPU)");
  app.add_option("--zone", daemon.zone,
                 "daemon: zone or rack label reported at registration; the coordinator keeps "
                 "each pipeline of a job in as few zones and hosts as it can (Kubernetes: the "
                 "node's topology.kubernetes.io/zone)");
  app.add_option("--job-metrics-retention-s", job_metrics_retention_s,
                 "daemon: a job's Prometheus series are removed this long after its run here "
                 "ends (0: at the next scrape)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30.0 * 24 * 3600));
  app.add_option("--tls-cert", daemon.tls_cert_file,
                 "daemon: certificate (PEM) served by the Worker service and presented to the "
                 "coordinator; enables TLS");
  app.add_option("--tls-key", daemon.tls_key_file, "daemon: private key (PEM) of --tls-cert");
  app.add_option("--tls-ca", daemon.tls_ca_file,
                 "daemon: CA (PEM) that verifies the coordinator and that the coordinator's "
                 "client certificate must chain to (mutual TLS; needs --tls-cert/--tls-key)");
  std::string cluster_secret_file;
  app.add_option("--cluster-secret-file", cluster_secret_file,
                 "daemon: file holding the cluster secret the coordinator requires (else the "
                 "PIPETRAIN_CLUSTER_SECRET environment variable)");
  app.add_option("--plan", plan.plan_path, "plan-file mode: PrepareRequest JSON");
  app.add_option("--rank", plan.rank,
                 "plan-file mode: this worker's rank (with parallelism.data_parallel d: the job "
                 "rank 0..d*p-1, replica R / p's pipeline rank R % p)");
  app.add_option("--steps", plan.steps, "plan-file mode: steps (default: training.steps)");
  app.add_option("--trace-dir", plan.trace_dir, "plan-file mode: Chrome trace per step here");
  app.add_option("--report", plan.report_path, "plan-file mode: one JSON line per step here");
  app.add_option("--resume-from", plan.resume_from,
                 "plan-file mode: checkpoint root dir; loads <dir>/step-<start-step>/stage-*.ckpt");
  app.add_option("--start-step", plan.start_step,
                 "plan-file mode: first step to run (the checkpoint's step with --resume-from)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", device,
                 "where the stage compute runs: auto (CUDA when a device is usable, else the CPU), "
                 "cpu, cuda (device 0) or cuda:N")
      ->capture_default_str();
  app.add_flag("--emulate", session.emulate,
               "EMULATED compute: sleep for the plan's predicted times (scale tests only)");
  app.add_option("--blas-threads", session.blas_threads, "OpenBLAS threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--copy-bandwidth", session.copy_bandwidth_bytes_per_s,
                 "cap on the OFFLOAD/RELOAD copy thread, bytes/s each way (0 = uncapped); a "
                 "PCIe-like host link on the CPU backend")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--connect-timeout", connect_timeout_s, "seconds to reach the neighbours")
      ->capture_default_str();
  app.add_option("--recv-timeout", recv_timeout_s, "seconds to wait for any one tensor")
      ->capture_default_str();
  app.add_option("--data-root", session.allowed_paths.data_root,
                 "jobs' training.data.path and model.init_from must lie under this directory "
                 "(after symlinks and ..); / allows any path")
      ->capture_default_str();
  app.add_option("--checkpoint-root", session.allowed_paths.checkpoint_root,
                 "jobs' checkpoint.dir and resumed checkpoints must lie under this directory; / "
                 "allows any path")
      ->capture_default_str();
  // Testing only (fault-tolerance tests), hence hidden from --help.
  app.add_option("--crash-in-checkpoint", session.crash_in_checkpoint,
                 "testing: SIGKILL this process halfway through writing checkpoint step-N")
      ->group("");
  CLI11_PARSE(app, argc, argv);
  session.connect_timeout = absl::Seconds(connect_timeout_s);
  daemon.job_metrics_retention = absl::Seconds(job_metrics_retention_s);
  absl::StatusOr<std::string> cluster_secret = pipetrain::LoadSecret(
      cluster_secret_file, "PIPETRAIN_CLUSTER_SECRET", "--cluster-secret-file");
  if (!cluster_secret.ok()) {
    std::fprintf(stderr, "pipetrain-worker: %s\n",
                 std::string(cluster_secret.status().message()).c_str());
    return 2;
  }
  daemon.cluster_secret = *std::move(cluster_secret);
  absl::StatusOr<pipetrain::worker::DeviceChoice> choice =
      pipetrain::worker::SelectDevice(device, *pipetrain::worker::SystemDeviceList());
  if (!choice.ok()) {
    std::fprintf(stderr, "pipetrain-worker: %s\n", std::string(choice.status().message()).c_str());
    return absl::IsInvalidArgument(choice.status()) ? 2 : 1;
  }
  if (!choice->fallback_reason.empty()) LOG(INFO) << choice->fallback_reason;
  LOG(INFO) << "computing on " << pipetrain::worker::Describe(choice->device);
  session.device = choice->device;
  session.recv_timeout = absl::Seconds(recv_timeout_s);
  session.available_host_memory_bytes = pipetrain::worker::AvailableHostMemoryBytes;

  absl::Status status;
  if (!plan.plan_path.empty()) {
    if (plan.rank < 0) {
      std::fprintf(stderr, "pipetrain-worker: --rank: required with --plan (0..workers-1)\n");
      return 2;
    }
    plan.session = session;
    status = pipetrain::worker::RunFromPlanFile(plan);
  } else if (!daemon.coordinator.empty()) {
    daemon.session = session;
    status = pipetrain::worker::RunWorkerDaemon(daemon);
  } else {
    std::fprintf(stderr,
                 "pipetrain-worker: give --coordinator HOST:PORT (daemon) or --plan FILE --rank R "
                 "(one rank of a plan file); see --help\n");
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "pipetrain-worker: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
