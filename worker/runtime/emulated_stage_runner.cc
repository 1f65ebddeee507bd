#include "worker/runtime/emulated_stage_runner.h"

#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::worker {

EmulatedStageRunner::EmulatedStageRunner(kernels::Backend* backend, int num_stages,
                                         EmulatedStageConfig config)
    : backend_(backend),
      num_stages_(num_stages),
      config_(std::move(config)),
      copier_(backend, BackendCopierOptions(config_.copy_bandwidth_bytes_per_s)) {}

void EmulatedStageRunner::Wait(double seconds) {
  // Sleep to an absolute deadline so scheduler jitter does not accumulate within one action.
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
  std::this_thread::sleep_until(until);
}

void EmulatedStageRunner::Account(int64_t delta) {
  stored_bytes_ += delta;
  if (stored_bytes_ > peak_bytes_) peak_bytes_ = stored_bytes_;
}

absl::StatusOr<EmulatedStageRunner::Stored*> EmulatedStageRunner::Find(int stage, int microbatch,
                                                                       const char* action) {
  auto it = store_.find(Key(stage, microbatch));
  if (it == store_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(action, " of stage ", stage, " microbatch ",
                                                      microbatch, " has no stored activations"));
  }
  // Waits for a pending RELOAD copy; an offloaded, never reloaded stash is an error.
  PT_RETURN_IF_ERROR(offloads_.AwaitResident(stage, microbatch, action));
  return &it->second;
}

absl::StatusOr<kernels::Tensor> EmulatedStageRunner::Boundary(const char* what) {
  return backend_->Empty({config_.boundary_elements}, what);
}

absl::Status EmulatedStageRunner::BeginStep(int) {
  if (!store_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(store_.size(), " activation sets left over from the previous step"));
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::Tensor> EmulatedStageRunner::Forward(int stage, int microbatch,
                                                             kernels::Tensor input) {
  const schedule::StageCost& cost = config_.costs.stages[stage];
  input.Reset();
  const auto elements = [&](double units) {
    return static_cast<int64_t>(std::llround(units * config_.bytes_per_unit / sizeof(float)));
  };
  Stored stored;
  PT_ASSIGN_OR_RETURN(stored.until_b,
                      backend_->Empty({elements(cost.freed_by_b)}, "activations (freed by B)"));
  PT_ASSIGN_OR_RETURN(stored.until_w, backend_->Empty({elements(cost.activation - cost.freed_by_b)},
                                                      "activations (freed by W)"));
  Account(stored.until_b.bytes() + stored.until_w.bytes());
  if (!store_.emplace(Key(stage, microbatch), std::move(stored)).second) {
    return absl::FailedPreconditionError("forward ran twice");
  }
  Wait(cost.f);
  ComputeEnded();
  if (stage == num_stages_ - 1) return kernels::Tensor();
  return Boundary("activation for the next stage");
}

absl::StatusOr<kernels::Tensor> EmulatedStageRunner::ValidationForward(int stage,
                                                                       int /*microbatch*/,
                                                                       kernels::Tensor input) {
  input.Reset();
  Wait(config_.costs.stages[stage].f);
  if (stage == num_stages_ - 1) return kernels::Tensor();
  return Boundary("activation for the next stage");
}

absl::StatusOr<kernels::Tensor> EmulatedStageRunner::ReleaseUntilB(int stage, int microbatch) {
  PT_ASSIGN_OR_RETURN(Stored * stored, Find(stage, microbatch, "backward"));
  Account(-stored->until_b.bytes());
  stored->until_b.Reset();
  if (stage == 0) return kernels::Tensor();
  return Boundary("gradient for the previous stage");
}

absl::StatusOr<kernels::Tensor> EmulatedStageRunner::BackwardInput(int stage, int microbatch,
                                                                   kernels::Tensor grad_output) {
  grad_output.Reset();
  // A reloaded stash must be back before the compute starts (not overlap it).
  PT_RETURN_IF_ERROR(offloads_.AwaitResident(stage, microbatch, "backward"));
  Wait(config_.costs.stages[stage].b);
  auto grad = ReleaseUntilB(stage, microbatch);
  ComputeEnded();
  return grad;
}

absl::Status EmulatedStageRunner::BackwardWeight(int stage, int microbatch) {
  PT_ASSIGN_OR_RETURN(Stored * stored, Find(stage, microbatch, "weight backward"));
  if (!stored->until_b.empty()) {
    return absl::FailedPreconditionError("weight backward ran before its input backward");
  }
  Wait(config_.costs.stages[stage].w);
  Account(-stored->until_w.bytes());
  store_.erase(Key(stage, microbatch));
  ComputeEnded();
  return absl::OkStatus();
}

absl::StatusOr<kernels::Tensor> EmulatedStageRunner::Backward(int stage, int microbatch,
                                                              kernels::Tensor grad_output) {
  grad_output.Reset();
  PT_RETURN_IF_ERROR(offloads_.AwaitResident(stage, microbatch, "backward"));
  Wait(config_.costs.stages[stage].FusedBackward());
  PT_ASSIGN_OR_RETURN(kernels::Tensor grad, ReleaseUntilB(stage, microbatch));
  Stored* stored = &store_.find(Key(stage, microbatch))->second;
  Account(-stored->until_w.bytes());
  store_.erase(Key(stage, microbatch));
  ComputeEnded();
  return grad;
}

absl::Status EmulatedStageRunner::Offload(int stage, int microbatch, bool explicit_release) {
  auto it = store_.find(Key(stage, microbatch));
  if (it == store_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("offload of stage ", stage, " microbatch ",
                                                      microbatch, " has no stored activations"));
  }
  PT_ASSIGN_OR_RETURN(
      const int64_t bytes,
      offloads_.Offload(stage, microbatch, {&it->second.until_b, &it->second.until_w},
                        explicit_release));
  // The device copy stays counted until a compute end after its copy (ComputeEnded) or its
  // RELEASE.
  offloaded_bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status EmulatedStageRunner::Reload(int stage, int microbatch) {
  auto it = store_.find(Key(stage, microbatch));
  if (it == store_.end()) {
    return absl::FailedPreconditionError("reload of activations that were not offloaded");
  }
  PT_RETURN_IF_ERROR(
      offloads_.Reload(stage, microbatch, {&it->second.until_b, &it->second.until_w}));
  Account(it->second.until_b.bytes() + it->second.until_w.bytes());
  return absl::OkStatus();
}

absl::Status EmulatedStageRunner::Release(int stage, int microbatch) {
  PT_ASSIGN_OR_RETURN(const int64_t freed, offloads_.Release(stage, microbatch));
  Account(-freed);
  return absl::OkStatus();
}

void EmulatedStageRunner::ComputeEnded() { Account(-offloads_.ReleaseAtComputeEnd()); }

absl::StatusOr<StepEnd> EmulatedStageRunner::EndStep(std::optional<GradientNormPart> /*norm*/) {
  const int64_t held = offloads_.held_device_bytes();
  absl::Status status = offloads_.EndStep();
  Account(-(held - offloads_.held_device_bytes()));
  PT_RETURN_IF_ERROR(status);
  if (!store_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        store_.size(), " (stage, microbatch) activation sets were never released by a W/BW"));
  }
  return StepEnd();
}

}  // namespace pipetrain::worker
