#include "worker/runtime/executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::worker {
namespace {

using schedule::Action;
using schedule::ActionKind;

absl::Status Annotate(const absl::Status& status, const Action& action, int step) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("step ", step, ", action ",
                                                  schedule::ToString(action), ": ",
                                                  status.message()));
}

}  // namespace

Executor::Executor(const schedule::Schedule& schedule, int rank, StageRunner* runner,
                   Transport* transport, ExecutorOptions options)
    : schedule_(schedule),
      rank_(rank),
      runner_(runner),
      transport_(transport),
      options_(options) {
  for (const Action& a : schedule_.worker_actions[rank_]) {
    if (a.kind == ActionKind::kRelease) {
      explicit_release_.insert((static_cast<int64_t>(a.stage) << 32) | a.microbatch);
    }
  }
}

void Executor::Deliver(int from_stage, int to_stage, int microbatch, Slot slot,
                       kernels::Tensor tensor) {
  if (schedule_.WorkerOf(to_stage) == rank_) {
    inbox_[Key{to_stage, microbatch, slot}] = std::move(tensor);
  } else {
    outbox_[Key{from_stage, microbatch, slot}] = std::move(tensor);
  }
}

absl::StatusOr<kernels::Tensor> Executor::TakeInput(const Action& action, Slot slot,
                                                    const char* what) {
  auto it = inbox_.find(Key{action.stage, action.microbatch, slot});
  if (it == inbox_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ", what, " has not arrived (no RECV or local producer ran before this action)"));
  }
  kernels::Tensor tensor = std::move(it->second);
  inbox_.erase(it);
  return tensor;
}

absl::Status Executor::Run(const Action& action, int step, int64_t* bytes) {
  const int last_stage = schedule_.num_stages - 1;
  const int s = action.stage;
  const int mb = action.microbatch;
  switch (action.kind) {
    case ActionKind::kF: {
      kernels::Tensor input;
      if (s > 0) {
        PT_ASSIGN_OR_RETURN(input, TakeInput(action, Slot::kActivation, "input activation"));
      }
      kernels::Tensor out;
      if (schedule_.forward_only) {
        PT_ASSIGN_OR_RETURN(out, runner_->ValidationForward(s, mb, std::move(input)));
      } else {
        PT_ASSIGN_OR_RETURN(out, runner_->Forward(s, mb, std::move(input)));
      }
      if (s < last_stage) Deliver(s, s + 1, mb, Slot::kActivation, std::move(out));
      *bytes = runner_->activation_bytes();
      return absl::OkStatus();
    }
    case ActionKind::kB:
    case ActionKind::kBW: {
      kernels::Tensor grad;
      if (s < last_stage) {
        PT_ASSIGN_OR_RETURN(grad, TakeInput(action, Slot::kGradient, "output gradient"));
      }
      kernels::Tensor grad_in;
      if (action.kind == ActionKind::kB) {
        PT_ASSIGN_OR_RETURN(grad_in, runner_->BackwardInput(s, mb, std::move(grad)));
      } else {
        PT_ASSIGN_OR_RETURN(grad_in, runner_->Backward(s, mb, std::move(grad)));
      }
      if (s > 0) Deliver(s, s - 1, mb, Slot::kGradient, std::move(grad_in));
      *bytes = runner_->activation_bytes();
      return absl::OkStatus();
    }
    case ActionKind::kW:
      PT_RETURN_IF_ERROR(runner_->BackwardWeight(s, mb));
      *bytes = runner_->activation_bytes();
      return absl::OkStatus();
    case ActionKind::kSendAct:
    case ActionKind::kSendGrad: {
      const Slot slot = action.kind == ActionKind::kSendAct ? Slot::kActivation : Slot::kGradient;
      auto it = outbox_.find(Key{s, mb, slot});
      if (it == outbox_.end()) {
        return absl::FailedPreconditionError(
            "nothing to send (its producer has not run on this worker)");
      }
      kernels::Tensor tensor = std::move(it->second);
      outbox_.erase(it);
      Message message;
      message.key = MessageKey{step, s, mb,
                               slot == Slot::kActivation ? TensorRole::kActivation
                                                         : TensorRole::kGradient};
      message.shape = tensor.shape();
      PT_ASSIGN_OR_RETURN(message.data, runner_->backend().ToVector(tensor));
      *bytes = message.bytes();
      const int peer = schedule_.WorkerOf(schedule::PeerStage(action));
      return transport_->Send(peer, std::move(message));
    }
    case ActionKind::kRecvAct:
    case ActionKind::kRecvGrad: {
      const bool act = action.kind == ActionKind::kRecvAct;
      const int from_stage = schedule::PeerStage(action);
      const MessageKey key{step, from_stage, mb,
                           act ? TensorRole::kActivation : TensorRole::kGradient};
      PT_ASSIGN_OR_RETURN(Message message,
                          transport_->Recv(schedule_.WorkerOf(from_stage), key,
                                           absl::Now() + options_.recv_timeout));
      PT_ASSIGN_OR_RETURN(kernels::Tensor tensor,
                          runner_->backend().FromHost(message.shape, message.data,
                                                      act ? "received activation"
                                                          : "received gradient"));
      *bytes = message.bytes();
      transport_->Recycle(std::move(message.data));
      inbox_[Key{s, mb, act ? Slot::kActivation : Slot::kGradient}] = std::move(tensor);
      return absl::OkStatus();
    }
    case ActionKind::kOffload:
      PT_RETURN_IF_ERROR(runner_->Offload(
          s, mb, explicit_release_.contains((static_cast<int64_t>(s) << 32) | mb)));
      *bytes = runner_->activation_bytes();
      return absl::OkStatus();
    case ActionKind::kReload:
      PT_RETURN_IF_ERROR(runner_->Reload(s, mb));
      *bytes = runner_->activation_bytes();
      return absl::OkStatus();
    case ActionKind::kRelease:
      PT_RETURN_IF_ERROR(runner_->Release(s, mb));
      *bytes = runner_->activation_bytes();
      return absl::OkStatus();
  }
  return absl::InternalError("unknown action kind");
}

// The two passes of the agreement are told apart by the microbatch field of the key.
constexpr int kStatusUp = 0;
constexpr int kStatusDown = 1;

absl::Status Executor::SendStepStatus(int step, int from_stage, int to_stage, bool finite) {
  Message message;
  message.key = MessageKey{step, from_stage, to_stage > from_stage ? kStatusUp : kStatusDown,
                           TensorRole::kStepStatus};
  message.shape = {1};
  message.data = {finite ? 1.0f : 0.0f};
  return transport_->Send(schedule_.WorkerOf(to_stage), std::move(message));
}

absl::StatusOr<bool> Executor::RecvStepStatus(int step, int from_stage, int to_stage) {
  const MessageKey key{step, from_stage, to_stage > from_stage ? kStatusUp : kStatusDown,
                       TensorRole::kStepStatus};
  PT_ASSIGN_OR_RETURN(Message message, transport_->Recv(schedule_.WorkerOf(from_stage), key,
                                                        absl::Now() + options_.recv_timeout));
  if (message.data.size() != 1) {
    return absl::DataLossError(
        absl::StrCat(ToString(key), ": ", message.data.size(), " values, expected 1"));
  }
  return message.data[0] != 0.0f;
}

absl::StatusOr<bool> Executor::AgreeGradientsFinite(int step, bool local_finite) {
  const int last = schedule_.num_stages - 1;
  std::vector<int> mine;
  for (int s = 0; s <= last; ++s) {
    if (schedule_.WorkerOf(s) == rank_) mine.push_back(s);
  }
  auto remote = [&](int s) { return s >= 0 && s <= last && schedule_.WorkerOf(s) != rank_; };
  bool finite = local_finite;
  for (int s : mine) {  // up
    if (remote(s - 1)) {
      PT_ASSIGN_OR_RETURN(const bool before, RecvStepStatus(step, s - 1, s));
      finite = finite && before;
    }
    if (remote(s + 1)) PT_RETURN_IF_ERROR(SendStepStatus(step, s, s + 1, finite));
  }
  for (auto it = mine.rbegin(); it != mine.rend(); ++it) {  // down
    const int s = *it;
    // The rank of stage s + 1 has the AND over every rank by now (it finished the up pass).
    if (remote(s + 1)) {
      PT_ASSIGN_OR_RETURN(finite, RecvStepStatus(step, s + 1, s));
    }
    if (remote(s - 1)) PT_RETURN_IF_ERROR(SendStepStatus(step, s, s - 1, finite));
  }
  PT_RETURN_IF_ERROR(transport_->Flush(absl::Now() + options_.recv_timeout));
  return finite;
}

absl::StatusOr<ValidationResult> Executor::RunValidation(int completed_steps) {
  if (!schedule_.forward_only) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a validation pass needs a forward-only plan; \"", schedule_.name, "\" trains"));
  }
  if (completed_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a validation pass runs after >= 1 step, not ", completed_steps));
  }
  ValidationResult result;
  result.completed_steps = completed_steps;
  inbox_.clear();
  outbox_.clear();
  const int key_step = -completed_steps;
  auto annotate = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("validation pass after step ",
                                                    completed_steps, ": ", status.message()));
  };
  if (absl::Status status = runner_->BeginValidation(completed_steps); !status.ok()) {
    return annotate(status);
  }
  const int64_t start = options_.clock->NowNs();
  for (const Action& action : schedule_.worker_actions[rank_]) {
    int64_t bytes = 0;
    if (absl::Status status = Run(action, key_step, &bytes); !status.ok()) {
      return annotate(absl::Status(
          status.code(), absl::StrCat(schedule::ToString(action), ": ", status.message())));
    }
  }
  if (absl::Status status = transport_->Flush(absl::Now() + options_.recv_timeout);
      !status.ok()) {
    return annotate(status);
  }
  if (!inbox_.empty() || !outbox_.empty()) {
    return annotate(absl::FailedPreconditionError(absl::StrCat(
        inbox_.size(), " received and ", outbox_.size(),
        " produced tensor(s) were never consumed (a RECV or SEND is missing from the plan)")));
  }
  absl::StatusOr<std::optional<double>> loss = runner_->EndValidation();
  if (!loss.ok()) return annotate(loss.status());
  result.loss = *loss;
  result.duration_ns = options_.clock->NowNs() - start;
  return result;
}

absl::StatusOr<StepResult> Executor::RunStep(int step) {
  if (schedule_.forward_only) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, ": a forward-only plan cannot train"));
  }
  StepResult result;
  result.step = step;
  inbox_.clear();
  outbox_.clear();
  const TransportStats before = transport_->stats();
  const int64_t offloaded_before = runner_->offloaded_bytes();
  runner_->ResetActivationPeak();
  runner_->backend().device_allocator().ResetPeak();
  PT_RETURN_IF_ERROR(runner_->BeginStep(step));
  const int64_t step_start = options_.clock->NowNs();
  const std::vector<Action>& actions = schedule_.worker_actions[rank_];
  result.timings.reserve(actions.size());
  for (const Action& action : actions) {
    ActionTiming timing{action, options_.clock->NowNs() - step_start, 0, 0};
    if (absl::Status status = Run(action, step, &timing.bytes); !status.ok()) {
      return Annotate(status, action, step);
    }
    if (options_.activation_budget_bytes > 0 &&
        runner_->peak_activation_bytes() > options_.activation_budget_bytes) {
      return Annotate(absl::ResourceExhaustedError(absl::StrCat(
                          "memory.device_budget_bytes: rank ", rank_, " holds ",
                          runner_->peak_activation_bytes(), " activation bytes, over the budget of ",
                          options_.activation_budget_bytes)),
                      action, step);
    }
    timing.end_ns = options_.clock->NowNs() - step_start;
    result.timings.push_back(timing);
  }
  PT_RETURN_IF_ERROR(transport_->Flush(absl::Now() + options_.recv_timeout));
  if (!inbox_.empty() || !outbox_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": ", inbox_.size(), " received and ", outbox_.size(),
        " produced tensor(s) were never consumed (a RECV or SEND is missing from the plan)"));
  }
  PT_ASSIGN_OR_RETURN(const std::optional<bool> finite, runner_->GradientsFinite());
  bool apply_update = true;
  if (finite.has_value()) {
    result.gradients_finite = *finite;
    absl::StatusOr<bool> agreed = AgreeGradientsFinite(step, *finite);
    if (!agreed.ok()) {
      return absl::Status(agreed.status().code(),
                          absl::StrCat("step ", step, ", agreeing on finite gradients: ",
                                       agreed.status().message()));
    }
    apply_update = *agreed;
  }
  result.update_skipped = !apply_update;
  PT_ASSIGN_OR_RETURN(result.loss, runner_->EndStep(apply_update));
  result.duration_ns = options_.clock->NowNs() - step_start;
  result.peak_activation_bytes = runner_->peak_activation_bytes();
  result.device_peak_bytes = runner_->backend().device_allocator().stats().peak_bytes;
  const TransportStats after = transport_->stats();
  result.sent_bytes = after.sent_bytes - before.sent_bytes;
  result.received_bytes = after.received_bytes - before.received_bytes;
  result.offloaded_bytes = runner_->offloaded_bytes() - offloaded_before;
  return result;
}

}  // namespace pipetrain::worker
