// WorkerAgent: the worker daemon's domain logic, with no gRPC in it. It keeps the worker
// registered with the coordinator (retrying with backoff while the coordinator is away, and
// re-registering when the coordinator forgets it), heartbeats, and serves the Worker service:
// Prepare builds a WorkerSession for one job and rank, Start runs its steps on a thread and
// reports every step (and the end, or the failure) through ReportStep, tagged with the attempt
// number of the Prepare, Abort stops it promptly. One job at a time.
//
// Shutdown (SIGTERM) first tells the coordinator the worker is leaving (a heartbeat with
// `leaving`: the job recovers at once, without waiting for the heartbeat deadline), then aborts
// the run: the step in flight stops; checkpoints are only ever renamed into place complete.
// An abort asked for in a heartbeat response applies only if no Prepare came in since that
// heartbeat was sent (so a stale answer cannot abort the job's next attempt).
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_WORKER_SERVICE_WORKER_AGENT_H_
#define PIPETRAIN_WORKER_SERVICE_WORKER_AGENT_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pipetrain/v1/worker.pb.h"
#include "worker/device/device_info.h"
#include "worker/runtime/worker_session.h"
#include "worker/service/coordinator_client.h"
#include "worker/service/worker_metrics.h"
#include "worker/transport/tcp_transport.h"

namespace pipetrain::worker {

struct WorkerAgentOptions {
  std::string name;               // stable name; re-registration keeps the id
  std::string transport_address;  // host:port peers connect to (bound by the listener below)
  std::string metrics_address;
  v1::DeviceKind device = v1::DEVICE_KIND_CPU;  // EMULATED when session.emulate
  DeviceInfo device_info;                       // what it computes on (session.device)
  // Host link bandwidth measured at start-up (copy_bandwidth.h), reported at registration.
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  // Where it computes (host_cpus.h) and the threads one compute action uses, reported at
  // registration.
  std::string host;
  std::string zone;  // placement label (coordinator/placement.h); empty: none
  int cpu_cores = 0;
  int compute_threads = 1;
  // CPU workers: one core's sgemm rate measured at start-up (core_sgemm.h), reported at
  // registration for the coordinator's MFU; 0: not measured.
  double core_sgemm_flops_per_s = 0;
  // Machine-wide lock held during the profiling step (host_lock.h); empty: none.
  std::string profile_lock_path;
  SessionOptions session;
  absl::Duration heartbeat_interval = absl::Seconds(1);  // until the coordinator says otherwise
  absl::Duration max_backoff = absl::Seconds(5);
};

class WorkerAgent {
 public:
  // `listener` is bound to transport_address's port (kept so the port stays ours). `metrics`
  // may be null. Not owned: coordinator, metrics.
  WorkerAgent(WorkerAgentOptions options, CoordinatorClient* coordinator,
              std::unique_ptr<TcpListener> listener, WorkerMetrics* metrics);
  ~WorkerAgent();

  // Starts the registration/heartbeat thread; `grpc_address` is where this worker's Worker
  // service listens (known once its server has started).
  void Start(std::string grpc_address);
  // Aborts any run and stops the heartbeat thread. Idempotent.
  void Shutdown();

  absl::StatusOr<v1::PrepareResponse> Prepare(const v1::PrepareRequest& request);
  // A fresh NCCL communicator id for a launch of `job_id` in which this worker is rank 0
  // (nccl_link.h); FailedPrecondition unless this worker computes on CUDA in a CUDA build.
  absl::StatusOr<std::string> CreateNcclId(const std::string& job_id);
  absl::Status StartRun(const v1::StartRequest& request);
  absl::Status Abort(const v1::AbortRequest& request);

  std::string worker_id() const;
  bool busy() const;
  // Whether a Worker call carrying bearer `token` comes from the coordinator: OK when its
  // registration issued no coordinator token (the coordinator has no cluster secret) or the
  // token is that one; else Unauthenticated.
  absl::Status AuthorizeCoordinator(std::optional<absl::string_view> token) const;

 private:
  void HeartbeatLoop();
  // Abort of `job_id`; when `generation` is set, only if no Prepare happened since it was read.
  absl::Status AbortRun(const std::string& job_id, const std::string& reason,
                        std::optional<int64_t> generation);
  void RunLoop(std::string job_id, int num_steps);
  // Joins a finished run thread and drops its session (not under mu_).
  void ReapRun();

  const WorkerAgentOptions options_;
  CoordinatorClient* coordinator_;
  WorkerMetrics* metrics_;

  mutable absl::Mutex mu_;
  std::unique_ptr<TcpListener> listener_ ABSL_GUARDED_BY(mu_);
  std::string grpc_address_ ABSL_GUARDED_BY(mu_);
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string coordinator_token_ ABSL_GUARDED_BY(mu_);  // from the latest registration
  std::string job_id_ ABSL_GUARDED_BY(mu_);  // prepared or running job
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  int replica_ ABSL_GUARDED_BY(mu_) = 0;  // data parallelism: the replica of rank_
  int step_ ABSL_GUARDED_BY(mu_) = 0;
  int attempt_ ABSL_GUARDED_BY(mu_) = 0;        // of the prepared job
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Prepare calls so far
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<WorkerSession> session_ ABSL_GUARDED_BY(mu_);
  std::thread run_thread_ ABSL_GUARDED_BY(mu_);
  std::thread heartbeat_thread_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_WORKER_AGENT_H_
