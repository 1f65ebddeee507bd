#include "worker/runtime/executor.h"

#include <time.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/transport/double_codec.h"

namespace pipetrain::worker {
namespace {

using schedule::Action;
using schedule::ActionKind;

// CPU time of the calling thread (not the injected clock: this is a measurement of the machine).
int64_t ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

absl::Status Annotate(const absl::Status& status, const Action& action, int step) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("step ", step, ", action ",
                                                  schedule::ToString(action), ": ",
                                                  status.message()));
}

// The stages placed on `rank`, ascending.
std::vector<int> StagesOf(const schedule::Schedule& schedule, int rank) {
  std::vector<int> stages;
  for (int s = 0; s < schedule.num_stages; ++s) {
    if (schedule.WorkerOf(s) == rank) stages.push_back(s);
  }
  return stages;
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
  const int last = schedule_.num_stages - 1;
  if (runner_->ties_embeddings() && schedule_.WorkerOf(0) != schedule_.WorkerOf(last)) {
    if (rank_ == schedule_.WorkerOf(0)) {
      tie_peer_ = schedule_.WorkerOf(last);
      tie_stage_ = 0;
      tie_peer_stage_ = last;
    } else if (rank_ == schedule_.WorkerOf(last)) {
      tie_peer_ = schedule_.WorkerOf(0);
      tie_stage_ = last;
      tie_peer_stage_ = 0;
    }
  }
  my_stages_ = StagesOf(schedule_, rank_);
  const std::vector<Action>& actions = schedule_.worker_actions[rank_];
  reduce_after_.assign(actions.size(), false);
  if (options_.replicas != nullptr && !schedule_.forward_only) {
    for (int s : my_stages_) {
      for (size_t i = actions.size(); i-- > 0;) {
        const Action& a = actions[i];
        if (a.stage == s && (a.kind == ActionKind::kW || a.kind == ActionKind::kBW)) {
          reduce_after_[i] = true;
          break;
        }
      }
    }
  }
  if (!my_stages_.empty() && my_stages_.front() > 0) {
    verdict_parent_ = schedule_.WorkerOf(my_stages_.front() - 1);
  }
  for (int r = 0; r < schedule_.num_workers; ++r) {
    const std::vector<int> theirs = StagesOf(schedule_, r);
    if (r != rank_ && !theirs.empty() && theirs.front() > 0 &&
        schedule_.WorkerOf(theirs.front() - 1) == rank_) {
      verdict_children_.push_back(r);
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
    // One compute stream: an overlapped F runs as a plain F, then its paired backward (the
    // next action) runs as usual.
    case ActionKind::kOverlapF:
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

namespace {

// The two passes are told apart by the microbatch field of the key.
constexpr int kSumPass = 0;
constexpr int kVerdictPass = 1;

// One double as EncodeDoubles' four pieces.
std::vector<float> EncodeDouble(double value) { return EncodeDoubles({value}); }

absl::StatusOr<double> DecodeDouble(const Message& message) {
  if (message.data.size() != 4) {
    return absl::DataLossError(absl::StrCat(ToString(message.key), ": ", message.data.size(),
                                            " values, expected 4"));
  }
  PT_ASSIGN_OR_RETURN(const std::vector<double> values, DecodeDoubles(message));
  return values[0];
}

}  // namespace

absl::Status Executor::SendSum(int step, int peer, int key_stage, int pass, double sum) {
  Message message;
  message.key = MessageKey{step, key_stage, pass, TensorRole::kStepStatus};
  message.data = EncodeDouble(sum);
  message.shape = {static_cast<int64_t>(message.data.size())};
  return transport_->Send(peer, std::move(message));
}

absl::StatusOr<double> Executor::RecvSum(int step, int peer, int key_stage, int pass) {
  const MessageKey key{step, key_stage, pass, TensorRole::kStepStatus};
  PT_ASSIGN_OR_RETURN(Message message,
                      transport_->Recv(peer, key, absl::Now() + options_.recv_timeout));
  return DecodeDouble(message);
}

absl::StatusOr<GradientNormPart> Executor::SumGradientNorm(int step) {
  const int last = schedule_.num_stages - 1;
  auto remote = [&](int s) { return s >= 0 && s <= last && schedule_.WorkerOf(s) != rank_; };
  double sum = 0;
  for (auto it = my_stages_.rbegin(); it != my_stages_.rend(); ++it) {
    const int s = *it;
    if (remote(s + 1)) {
      PT_ASSIGN_OR_RETURN(sum, RecvSum(step, schedule_.WorkerOf(s + 1), s + 1, kSumPass));
    }
    PT_ASSIGN_OR_RETURN(sum, runner_->AddGradientSquares(s, sum));
    if (remote(s - 1)) {
      PT_RETURN_IF_ERROR(SendSum(step, schedule_.WorkerOf(s - 1), s, kSumPass, sum));
    }
  }
  return GradientNormPart{sum, my_stages_.front() == 0};
}

absl::Status Executor::SendVerdict(int step, double sum_squares) {
  for (int child : verdict_children_) {
    const int key_stage = StagesOf(schedule_, child).front() - 1;
    PT_RETURN_IF_ERROR(SendSum(step, child, key_stage, kVerdictPass, sum_squares));
  }
  return absl::OkStatus();
}

absl::Status Executor::ExchangeTiedGradient(int step) {
  PT_ASSIGN_OR_RETURN(std::vector<float> mine, runner_->TiedGradient());
  Message message;
  message.key = MessageKey{step, tie_stage_, 0, TensorRole::kTiedGradient};
  message.shape = {static_cast<int64_t>(mine.size())};
  message.data = std::move(mine);
  PT_RETURN_IF_ERROR(transport_->Send(tie_peer_, std::move(message)));
  const MessageKey key{step, tie_peer_stage_, 0, TensorRole::kTiedGradient};
  PT_ASSIGN_OR_RETURN(Message theirs,
                      transport_->Recv(tie_peer_, key, absl::Now() + options_.recv_timeout));
  PT_RETURN_IF_ERROR(runner_->AddTiedGradient(theirs.data));
  transport_->Recycle(std::move(theirs.data));
  return absl::OkStatus();
}

absl::Status Executor::SettlePendingUpdate() {
  if (!pending_step_.has_value()) return absl::OkStatus();
  const int step = *pending_step_;
  pending_step_.reset();
  absl::StatusOr<double> sum = RecvSum(step, verdict_parent_, my_stages_.front() - 1, kVerdictPass);
  absl::Status status = sum.status();
  if (status.ok()) status = SendVerdict(step, *sum);
  if (status.ok()) status = runner_->SettleUpdate(*sum);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("step ", step, ", settling its update: ",
                                                    status.message()));
  }
  return absl::OkStatus();
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
  const int64_t step_start = options_.clock->NowNs();
  // The verdict on the last step's update (file comment); counted in this step's time.
  PT_RETURN_IF_ERROR(SettlePendingUpdate());
  PT_RETURN_IF_ERROR(runner_->BeginStep(step));
  if (options_.replicas != nullptr) options_.replicas->BeginStep(step_start);
  const std::vector<Action>& actions = schedule_.worker_actions[rank_];
  result.timings.reserve(actions.size());
  int64_t cpu_start = ThreadCpuNs();
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& action = actions[i];
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
    // One reading per action: its end is the next action's start (a syscall, not the vDSO).
    const int64_t cpu_end = ThreadCpuNs();
    timing.cpu_ns = cpu_end - cpu_start;
    cpu_start = cpu_end;
    result.timings.push_back(timing);
    if (reduce_after_[i]) {
      if (absl::Status status = options_.replicas->StageDone(step, action.stage); !status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat("step ", step, ", summing stage ", action.stage,
                                         "'s gradients across replicas: ", status.message()));
      }
      cpu_start = ThreadCpuNs();  // the sum's own CPU is no action's
    }
  }
  PT_RETURN_IF_ERROR(transport_->Flush(absl::Now() + options_.recv_timeout));
  if (!inbox_.empty() || !outbox_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": ", inbox_.size(), " received and ", outbox_.size(),
        " produced tensor(s) were never consumed (a RECV or SEND is missing from the plan)"));
  }
  if (options_.replicas != nullptr) {
    if (absl::Status status = options_.replicas->FinishStep(step); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("step ", step, ", ending the sum across "
                                                      "replicas: ", status.message()));
    }
    result.reduce_timings = options_.replicas->timings();
  }
  if (tie_peer_ >= 0) {
    if (absl::Status tied = ExchangeTiedGradient(step); !tied.ok()) {
      return absl::Status(tied.code(), absl::StrCat("step ", step, ", exchanging the tied "
                                                    "embedding's gradient: ", tied.message()));
    }
  }
  PT_ASSIGN_OR_RETURN(const bool has_gradients, runner_->SumGradientSquares());
  std::optional<GradientNormPart> norm;
  if (has_gradients) {
    absl::StatusOr<GradientNormPart> part = SumGradientNorm(step);
    if (!part.ok()) {
      return absl::Status(part.status().code(),
                          absl::StrCat("step ", step, ", summing the gradient norm: ",
                                       part.status().message()));
    }
    norm = *part;
    // The rank of stage 0 knows the verdict now: pass it on before updating.
    if (norm->complete) PT_RETURN_IF_ERROR(SendVerdict(step, norm->sum_squares));
  }
  PT_ASSIGN_OR_RETURN(StepEnd end, runner_->EndStep(norm));
  if (norm.has_value() && !norm->complete) pending_step_ = step;
  if (has_gradients) PT_RETURN_IF_ERROR(transport_->Flush(absl::Now() + options_.recv_timeout));
  result.loss = end.loss;
  if (end.verdict.has_value()) {
    result.update_skipped = !end.verdict->finite;
    result.grad_norm = end.verdict->norm;
    result.grad_clipped = end.verdict->clipped;
  }
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
