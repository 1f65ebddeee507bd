// Coordinator: the assembled daemon behind pipetrain-coordinator. It owns the job store (SQLite
// at config.db_path unless one is injected), the metrics, the worker registry, the job manager,
// the gRPC server (JobService + WorkerRegistry + grpc.health.v1 + reflection; optional bearer
// token on JobService and optional TLS / mutual TLS) and the Prometheus Exposer (its series,
// the build info and the gRPC server's RPC counts). main parses the
// flags into CoordinatorConfig; tests build one in-process on port 0.
//
// Thread-safety: Start/Shutdown from one thread; the accessors' objects are thread-safe.
#ifndef PIPETRAIN_COORDINATOR_COORDINATOR_H_
#define PIPETRAIN_COORDINATOR_COORDINATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_store.h"
#include "coordinator/metrics.h"
#include "coordinator/worker_client.h"
#include "coordinator/worker_registry.h"

namespace grpc {
class Server;
}
namespace prometheus {
class Exposer;
}

namespace pipetrain {
class GrpcServerMetrics;
}

namespace pipetrain::coordinator {

class JobServiceImpl;
class WorkerRegistryServiceImpl;

struct CoordinatorConfig {
  std::string listen = "127.0.0.1:7070";          // port 0: pick one (see address())
  std::string metrics_listen = "127.0.0.1:9464";  // empty: no metrics endpoint; port 0 allowed
  std::string db_path = "./pipetrain.db";
  // A worker silent this long is lost (its job recovers); workers heartbeat 5 times per timeout.
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  std::string auth_token;  // non-empty: JobService calls need "authorization: Bearer <token>"
  // Non-empty: workers register with it and get per-registration credentials that every later
  // call in either direction carries (docs/security.md).
  std::string cluster_secret;
  // PEM files. cert + key: serve TLS, and call workers over TLS presenting this certificate as
  // the client certificate. client_ca: require and verify client certificates (mutual TLS:
  // workers and, when TLS is on, clients); also the roots that verify workers (empty: the
  // system roots).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  int max_receive_message_bytes = 16 << 20;
  // A job's Prometheus series are removed this long after it ends (docs/metrics.md).
  absl::Duration job_metrics_retention = absl::Minutes(10);
  JobManagerOptions jobs;
  // Injected for tests (not owned; must outlive the coordinator). Null: the real ones.
  JobStore* store = nullptr;
  WorkerClient* worker_client = nullptr;
};

class Coordinator {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorConfig& config);
  ~Coordinator();

  // "host:port" actually bound (the chosen port when asked for port 0).
  const std::string& address() const { return address_; }
  const std::string& metrics_address() const { return metrics_address_; }

  // Health NOT_SERVING, stop the scheduler (running jobs fail and their workers are aborted),
  // end watch streams, stop the server. Idempotent.
  void Shutdown();

  JobManager& jobs() { return *jobs_; }
  WorkerRegistry& registry() { return *registry_; }
  CoordinatorMetrics& metrics() { return *metrics_; }

 private:
  Coordinator() = default;

  std::unique_ptr<JobStore> owned_store_;
  std::unique_ptr<WorkerClient> owned_worker_client_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<GrpcServerMetrics> grpc_metrics_;  // counts the server's RPCs into metrics_
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<WorkerRegistryServiceImpl> registry_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
  std::string metrics_address_;
  bool shut_down_ = false;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_COORDINATOR_H_
