// GroupedTransport: a data-parallel job's transport made of two communicators, as NCCL runs it
// (common/nccl_groups.h): the *pipeline group* of this worker's replica (its p ranks, where
// activations and input gradients travel) and the *stage group* of its pipeline rank (the d
// ranks that hold the same stages in every replica, where the gradient sums travel). Each group
// numbers its ranks from 0; callers speak job ranks (replica q's pipeline rank w is job rank
// q * p + w), and this class routes each message to the group that links the two ranks.
//
// Why two communicators rather than one spanning d x p ranks: an NCCL link runs lock-step
// rounds with all its peers (nccl_transport.h), so a stage's gradient sum in one round would hold
// the next activation back until it had moved; on a communicator of its own it moves beside
// them, which is what lets the sums overlap the cool-down.
//
// A peer in neither group (another replica's other pipeline rank) is an InvalidArgument: the
// executor and the replica reducer never address one. Flush, Abort and stats cover both groups.
//
// Thread-safety: thread-safe (both groups are, and this class holds no mutable state).
#ifndef PIPETRAIN_WORKER_TRANSPORT_GROUPED_TRANSPORT_H_
#define PIPETRAIN_WORKER_TRANSPORT_GROUPED_TRANSPORT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

class GroupedTransport final : public Transport {
 public:
  // This worker is replica `replica` of `replicas`, pipeline rank `pipeline_rank` of
  // `pipeline_ranks`. `pipeline` speaks ranks 0..p-1 of this replica (null when p = 1); `stage`
  // speaks replicas 0..d-1 at this pipeline rank (null when d = 1). InvalidArgument for a place
  // outside the job, both groups null, or a group's rank() that is not this worker's place in it.
  static absl::StatusOr<std::unique_ptr<GroupedTransport>> Create(
      int replica, int replicas, int pipeline_rank, int pipeline_ranks,
      std::unique_ptr<Transport> pipeline, std::unique_ptr<Transport> stage);

  int rank() const override { return replica_ * pipeline_ranks_ + pipeline_rank_; }
  absl::Status Send(int peer, Message message) override;
  absl::StatusOr<Message> Recv(int peer, const MessageKey& key, absl::Time deadline) override;
  absl::Status Flush(absl::Time deadline) override;
  TransportStats stats() const override;
  void Abort(absl::Status status) override;
  void Recycle(std::vector<float> buffer) override;

 private:
  GroupedTransport(int replica, int replicas, int pipeline_rank, int pipeline_ranks,
                   std::unique_ptr<Transport> pipeline, std::unique_ptr<Transport> stage);
  // The group that links this worker to job rank `peer`, and the peer's rank in it.
  absl::StatusOr<std::pair<Transport*, int>> Route(int peer) const;

  const int replica_, replicas_, pipeline_rank_, pipeline_ranks_;
  const std::unique_ptr<Transport> pipeline_;  // may be null
  const std::unique_ptr<Transport> stage_;     // may be null
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_GROUPED_TRANSPORT_H_
