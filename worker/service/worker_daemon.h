// RunWorkerDaemon: the long-running worker process. Serves the pipetrain.v1.Worker gRPC service
// (plus grpc.health.v1 and reflection; plaintext, TLS, or mutual TLS requiring a client
// certificate from the configured CA), exposes Prometheus metrics, binds the tensor transport
// port, registers with the coordinator (retrying while it is away) and runs the jobs it is
// given until SIGTERM/SIGINT, then reports NOT_SERVING, aborts any run and exits cleanly.
//
// Thread-safety: call once, from main.
#ifndef PIPETRAIN_WORKER_SERVICE_WORKER_DAEMON_H_
#define PIPETRAIN_WORKER_SERVICE_WORKER_DAEMON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/runtime/worker_session.h"

namespace pipetrain::worker {

struct WorkerDaemonConfig {
  std::string coordinator;                       // host:port of the coordinator
  std::string listen = "127.0.0.1:0";            // gRPC Worker service
  std::string transport_listen = "127.0.0.1:0";  // tensor transport
  std::string metrics_listen = "127.0.0.1:0";    // Prometheus /metrics; empty disables
  std::string name;                              // default: worker-<pid>
  // The host label reported at registration; empty: this machine's hostname. Workers with one
  // label are taken to share a machine: its CPU cores (the step-time prediction) and its GPUs
  // by ordinal (NCCL needs a GPU of its own per rank; coordinator/transport_choice.h).
  std::string host;
  // A zone / rack label reported at registration for placement (coordinator/placement.h);
  // empty: none.
  std::string zone;
  // PEM files. cert + key: the Worker service serves TLS, and this worker presents the cert to
  // the coordinator (mutual TLS). ca: verifies the coordinator (the system roots when empty)
  // and, given with cert + key, is the CA that callers of the Worker service (the coordinator)
  // must present a certificate from. Any set: the channel to the coordinator uses TLS. ca
  // alone is rejected (the coordinator calls a TLS cluster's workers over TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // Presented when registering with a coordinator that requires it (docs/security.md).
  std::string cluster_secret;
  // A job's Prometheus series are removed this long after its run here ends (docs/metrics.md).
  absl::Duration job_metrics_retention = absl::Minutes(10);
  SessionOptions session;
};

// Blocks until a termination signal. SIGTERM and SIGINT must be blocked in every thread
// before this is called (main does it first thing) so that this function can wait for them.
absl::Status RunWorkerDaemon(const WorkerDaemonConfig& config);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_WORKER_DAEMON_H_
