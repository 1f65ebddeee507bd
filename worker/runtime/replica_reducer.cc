#include "worker/runtime/replica_reducer.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/transport/double_codec.h"

namespace pipetrain::worker {
namespace {

// kReplicaGradient keys tell the two passes apart by the microbatch field.
constexpr int kRunningSum = 0;   // microbatches 0..q*k-1, for replica q
constexpr int kCompleteSum = 1;  // every microbatch, for every replica

}  // namespace

std::vector<int> ReplicaPeers(const ReplicaPlace& place) {
  std::vector<int> peers;
  for (int q = 0; q < place.replicas; ++q) {
    if (q != place.replica) peers.push_back(place.JobRank(q));
  }
  return peers;
}

ReplicaReducer::ReplicaReducer(const ReplicaPlace& place, std::vector<int> stages, int last_stage,
                               int microbatches_per_replica, StageRunner* runner,
                               Transport* transport, absl::Duration recv_timeout,
                               const Clock* clock)
    : place_(place),
      stages_(std::move(stages)),
      last_stage_(last_stage),
      k_(microbatches_per_replica),
      runner_(runner),
      transport_(transport),
      recv_timeout_(recv_timeout),
      clock_(clock) {}

void ReplicaReducer::BeginStep(int64_t step_start_ns) {
  step_start_ns_ = step_start_ns;
  reduced_.clear();
  timings_.clear();
}

absl::Status ReplicaReducer::StageDone(int step, int stage) {
  if (!reduced_.insert(stage).second) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", stage, "'s gradients were already summed across replicas"));
  }
  const int q = place_.replica;
  const int d = place_.replicas;
  ReduceTiming timing{stage, clock_->NowNs() - step_start_ns_, 0, 0};
  if (q > 0) {
    const MessageKey key{step, stage, kRunningSum, TensorRole::kReplicaGradient};
    PT_ASSIGN_OR_RETURN(Message before, transport_->Recv(place_.JobRank(q - 1), key,
                                                         absl::Now() + recv_timeout_));
    PT_RETURN_IF_ERROR(runner_->ResumeStageGradients(stage, before.data, q * k_));
    transport_->Recycle(std::move(before.data));
  }
  PT_ASSIGN_OR_RETURN(std::vector<float> sum, runner_->StageGradients(stage));
  auto send = [&](int to_replica, int pass, std::vector<float> data) {
    Message message;
    message.key = MessageKey{step, stage, pass, TensorRole::kReplicaGradient};
    message.shape = {static_cast<int64_t>(data.size())};
    message.data = std::move(data);
    timing.bytes += message.bytes();
    return transport_->Send(place_.JobRank(to_replica), std::move(message));
  };
  if (q < d - 1) {
    PT_RETURN_IF_ERROR(send(q + 1, kRunningSum, std::move(sum)));
  } else {
    for (int r = 0; r < d - 2; ++r) PT_RETURN_IF_ERROR(send(r, kCompleteSum, sum));
    PT_RETURN_IF_ERROR(send(d - 2, kCompleteSum, std::move(sum)));  // the last one takes it
  }
  timing.end_ns = clock_->NowNs() - step_start_ns_;
  timings_.push_back(timing);
  return absl::OkStatus();
}

absl::Status ReplicaReducer::FinishStep(int step) {
  const int q = place_.replica;
  const int d = place_.replicas;
  for (int stage : stages_) {
    if (!reduced_.contains(stage)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", stage, " had no weight-gradient action this step, so its gradients were "
          "never summed across replicas"));
    }
    if (q == d - 1) continue;
    const MessageKey key{step, stage, kCompleteSum, TensorRole::kReplicaGradient};
    PT_ASSIGN_OR_RETURN(Message sum, transport_->Recv(place_.JobRank(d - 1), key,
                                                      absl::Now() + recv_timeout_));
    PT_RETURN_IF_ERROR(runner_->ResumeStageGradients(stage, sum.data, d * k_));
    transport_->Recycle(std::move(sum.data));
  }
  bool holds_last = false;
  for (int stage : stages_) holds_last = holds_last || stage == last_stage_;
  if (!holds_last) return absl::OkStatus();
  if (q > 0) {
    // (index, loss) pairs, both exact as doubles.
    std::vector<double> pairs;
    for (const auto& [mb, loss] : runner_->TakeStepLosses()) {
      pairs.push_back(mb);
      pairs.push_back(loss);
    }
    Message message;
    message.key = MessageKey{step, last_stage_, q, TensorRole::kReplicaLoss};
    message.data = EncodeDoubles(pairs);
    message.shape = {static_cast<int64_t>(message.data.size())};
    return transport_->Send(place_.JobRank(0), std::move(message));
  }
  for (int r = 1; r < d; ++r) {
    const MessageKey key{step, last_stage_, r, TensorRole::kReplicaLoss};
    PT_ASSIGN_OR_RETURN(Message message,
                        transport_->Recv(place_.JobRank(r), key, absl::Now() + recv_timeout_));
    PT_ASSIGN_OR_RETURN(const std::vector<double> pairs, DecodeDoubles(message));
    if (pairs.size() != 2 * static_cast<size_t>(k_)) {
      return absl::DataLossError(absl::StrCat("replica ", r, " sent ", pairs.size() / 2,
                                              " microbatch losses, expected ", k_));
    }
    std::map<int, double> losses;
    for (size_t i = 0; i < pairs.size(); i += 2) {
      const int mb = static_cast<int>(pairs[i]);
      if (mb < r * k_ || mb >= (r + 1) * k_) {
        return absl::DataLossError(
            absl::StrCat("replica ", r, " sent the loss of microbatch ", mb,
                         ", which is not one of its ", r * k_, "..", (r + 1) * k_ - 1));
      }
      losses[mb] = pairs[i + 1];
    }
    runner_->AddStepLosses(losses);
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::worker
