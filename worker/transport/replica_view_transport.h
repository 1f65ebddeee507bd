// ReplicaViewTransport: one data-parallel replica's view of the job's transport. The executor
// names peers by their rank in the plan's pipeline (0..p-1); with d replicas the job's transport
// connects d x p workers, replica q's pipeline rank s being job rank q * p + s
// (docs/data_parallel.md). This view adds the replica's offset q * p to every peer and forwards
// everything else, so the executor runs unchanged in any replica.
//
// Thread-safety: as the wrapped transport (thread-safe).
#ifndef PIPETRAIN_WORKER_TRANSPORT_REPLICA_VIEW_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_REPLICA_VIEW_TRANSPORT_H_

#include <utility>
#include <vector>

#include "worker/transport/transport.h"

namespace pipetrain::worker {

class ReplicaViewTransport final : public Transport {
 public:
  // `job` (not owned) must outlive the view; offset = replica x pipeline ranks.
  ReplicaViewTransport(Transport* job, int offset) : job_(job), offset_(offset) {}

  int rank() const override { return job_->rank() - offset_; }
  absl::Status Send(int peer, Message message) override {
    return job_->Send(peer + offset_, std::move(message));
  }
  absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) override {
    return job_->Recv(peer + offset_, key, deadline);
  }
  absl::Status Flush(absl::Time deadline) override { return job_->Flush(deadline); }
  TransportStats stats() const override { return job_->stats(); }
  void Abort(absl::Status status) override { job_->Abort(std::move(status)); }
  void Recycle(std::vector<float> buffer) override { job_->Recycle(std::move(buffer)); }

 private:
  Transport* const job_;
  const int offset_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_REPLICA_VIEW_TRANSPORT_H_
