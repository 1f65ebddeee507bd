// WorkerServiceImpl: the thin gRPC adapter of the pipetrain.v1.Worker service over a
// WorkerAgent. Status conversion happens here and nowhere else in the worker.
//
// Thread-safety: thread-safe (gRPC calls it from many threads; the agent is thread-safe).
#ifndef PIPETRAIN_WORKER_SERVICE_WORKER_SERVICE_H_
#define PIPETRAIN_WORKER_SERVICE_WORKER_SERVICE_H_

#include "pipetrain/v1/worker.grpc.pb.h"
#include "worker/service/worker_agent.h"

namespace pipetrain::worker {

class WorkerServiceImpl final : public v1::Worker::Service {
 public:
  explicit WorkerServiceImpl(WorkerAgent* agent) : agent_(agent) {}

  grpc::Status Prepare(grpc::ServerContext* context, const v1::PrepareRequest* request,
                       v1::PrepareResponse* response) override;
  grpc::Status CreateNcclId(grpc::ServerContext* context, const v1::CreateNcclIdRequest* request,
                            v1::CreateNcclIdResponse* response) override;
  grpc::Status Start(grpc::ServerContext* context, const v1::StartRequest* request,
                     v1::StartResponse* response) override;
  grpc::Status Abort(grpc::ServerContext* context, const v1::AbortRequest* request,
                     v1::AbortResponse* response) override;
  // Tensors travel over the TCP transport (transport_address), not gRPC: see worker.proto.
  grpc::Status TransferTensor(grpc::ServerContext* context,
                              grpc::ServerReader<v1::TensorMessage>* reader,
                              v1::TransferAck* response) override;

 private:
  WorkerAgent* agent_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_SERVICE_WORKER_SERVICE_H_
