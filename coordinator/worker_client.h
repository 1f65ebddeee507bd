// WorkerClient: how the coordinator drives a worker (the pipetrain.v1.Worker service): Prepare a
// rank of a job (after asking rank 0 for an NCCL id when the job's tensors go over NCCL), Start
// its steps, Abort it. The gRPC implementation is grpc_worker_client.h; tests
// use a fake that injects failures and delays (tests/fakes/fake_worker_client.h).
//
// Thread-safety: implementations are thread-safe; calls to different workers (and to the same
// worker) may run concurrently.
#ifndef PIPETRAIN_COORDINATOR_WORKER_CLIENT_H_
#define PIPETRAIN_COORDINATOR_WORKER_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pipetrain/v1/worker.pb.h"

namespace pipetrain::coordinator {

class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  // `address`: the worker's Worker service (host:port). Each call fails with DeadlineExceeded
  // when it takes longer than `timeout`.
  virtual absl::StatusOr<v1::PrepareResponse> Prepare(const std::string& address,
                                                      const v1::PrepareRequest& request,
                                                      absl::Duration timeout) = 0;
  // A fresh NCCL communicator id from the worker that will be rank 0 of `job_id`.
  virtual absl::StatusOr<std::string> CreateNcclId(const std::string& address,
                                                   const std::string& job_id,
                                                   absl::Duration timeout) = 0;
  virtual absl::Status Start(const std::string& address, const v1::StartRequest& request,
                             absl::Duration timeout) = 0;
  virtual absl::Status Abort(const std::string& address, const v1::AbortRequest& request,
                             absl::Duration timeout) = 0;
  // Ends every Prepare, CreateNcclId and Start in flight with Cancelled and fails later ones at
  // once: a coordinator shutting down must not wait out a slow worker's Prepare (up to its
  // timeout). Abort calls still go out (a shutdown aborts running jobs). Not undone.
  virtual void CancelLaunchCalls() = 0;
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_WORKER_CLIENT_H_
