#include "worker/transport/grouped_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

absl::StatusOr<std::unique_ptr<GroupedTransport>> GroupedTransport::Create(
    int replica, int replicas, int pipeline_rank, int pipeline_ranks,
    std::unique_ptr<Transport> pipeline, std::unique_ptr<Transport> stage) {
  if (replicas < 1 || pipeline_ranks < 1 || replica < 0 || replica >= replicas ||
      pipeline_rank < 0 || pipeline_rank >= pipeline_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("grouped transport: replica ", replica, " of ",
                                                   replicas, ", pipeline rank ", pipeline_rank,
                                                   " of ", pipeline_ranks, " is outside the job"));
  }
  if (pipeline == nullptr && stage == nullptr) {
    return absl::InvalidArgumentError("grouped transport: neither a pipeline nor a stage group");
  }
  if (pipeline != nullptr && pipeline->rank() != pipeline_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("grouped transport: the pipeline group's rank is ", pipeline->rank(),
                     ", this worker is pipeline rank ", pipeline_rank));
  }
  if (stage != nullptr && stage->rank() != replica) {
    return absl::InvalidArgumentError(absl::StrCat("grouped transport: the stage group's rank is ",
                                                   stage->rank(), ", this worker is replica ",
                                                   replica));
  }
  return std::unique_ptr<GroupedTransport>(new GroupedTransport(
      replica, replicas, pipeline_rank, pipeline_ranks, std::move(pipeline), std::move(stage)));
}

GroupedTransport::GroupedTransport(int replica, int replicas, int pipeline_rank, int pipeline_ranks,
                                   std::unique_ptr<Transport> pipeline,
                                   std::unique_ptr<Transport> stage)
    : replica_(replica),
      replicas_(replicas),
      pipeline_rank_(pipeline_rank),
      pipeline_ranks_(pipeline_ranks),
      pipeline_(std::move(pipeline)),
      stage_(std::move(stage)) {}

absl::StatusOr<std::pair<Transport*, int>> GroupedTransport::Route(int peer) const {
  if (peer < 0 || peer >= replicas_ * pipeline_ranks_ || peer == rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grouped transport: peer ", peer, " is not another rank of the job's ",
                     replicas_ * pipeline_ranks_, " (this is rank ", rank(), ")"));
  }
  const int q = peer / pipeline_ranks_, w = peer % pipeline_ranks_;
  if (q == replica_ && pipeline_ != nullptr) return std::make_pair(pipeline_.get(), w);
  if (w == pipeline_rank_ && stage_ != nullptr) return std::make_pair(stage_.get(), q);
  return absl::InvalidArgumentError(absl::StrCat("grouped transport: rank ", rank(), " (replica ",
                                                 replica_, ", pipeline rank ", pipeline_rank_,
                                                 ") shares no group with rank ", peer, " (replica ",
                                                 q, ", pipeline rank ", w, ")"));
}

absl::Status GroupedTransport::Send(int peer, Message message) {
  absl::StatusOr<std::pair<Transport*, int>> route = Route(peer);
  if (!route.ok()) return route.status();
  return route->first->Send(route->second, std::move(message));
}

absl::StatusOr<Message> GroupedTransport::Recv(int peer, const MessageKey& key,
                                               absl::Time deadline) {
  absl::StatusOr<std::pair<Transport*, int>> route = Route(peer);
  if (!route.ok()) return route.status();
  return route->first->Recv(route->second, key, deadline);
}

absl::Status GroupedTransport::Flush(absl::Time deadline) {
  absl::Status status;
  for (Transport* t : {pipeline_.get(), stage_.get()}) {
    if (t != nullptr) status.Update(t->Flush(deadline));
  }
  return status;
}

TransportStats GroupedTransport::stats() const {
  TransportStats sum;
  for (const Transport* t : {pipeline_.get(), stage_.get()}) {
    if (t == nullptr) continue;
    const TransportStats s = t->stats();
    sum.sent_bytes += s.sent_bytes;
    sum.received_bytes += s.received_bytes;
    sum.sent_messages += s.sent_messages;
    sum.received_messages += s.received_messages;
  }
  return sum;
}

void GroupedTransport::Abort(absl::Status status) {
  for (Transport* t : {pipeline_.get(), stage_.get()}) {
    if (t != nullptr) t->Abort(status);
  }
}

void GroupedTransport::Recycle(std::vector<float> buffer) {
  // Received activations are what recurs; gradient sums come once per stage and step.
  (pipeline_ != nullptr ? pipeline_ : stage_)->Recycle(std::move(buffer));
}

}  // namespace pipetrain::worker
