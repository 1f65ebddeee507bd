#include "worker/runtime/model_stage_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/checkpoint_layout.h"
#include "worker/model/chunk_checkpoint.h"

namespace pipetrain::worker {

absl::StatusOr<std::unique_ptr<ModelStageRunner>> ModelStageRunner::Create(
    kernels::Backend* backend, ModelStageConfig config) {
  PT_RETURN_IF_ERROR(config.model.Validate());
  PT_ASSIGN_OR_RETURN(std::vector<model::ChunkSpec> specs,
                      model::SplitEvenly(config.model, config.num_stages));
  auto runner = std::unique_ptr<ModelStageRunner>(new ModelStageRunner(backend, config));
  for (int stage : runner->config_.stages) {
    if (stage < 0 || stage >= config.num_stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", stage, " is outside 0..", config.num_stages - 1));
    }
    PT_ASSIGN_OR_RETURN(runner->chunks_[stage],
                        model::GptChunk::Create(backend, config.model, specs[stage], config.chunk));
  }
  return runner;
}

model::GptChunk* ModelStageRunner::chunk(int stage) {
  auto it = chunks_.find(stage);
  return it == chunks_.end() ? nullptr : it->second.get();
}

absl::StatusOr<model::GptChunk*> ModelStageRunner::Chunk(int stage) {
  model::GptChunk* c = chunk(stage);
  if (c == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("stage ", stage, " is not on this worker"));
  }
  return c;
}

absl::StatusOr<model::GptChunk*> ModelStageRunner::ResidentChunk(int stage, int microbatch,
                                                                 const char* action) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  PT_RETURN_IF_ERROR(offloads_.AwaitResident(stage, microbatch, action));
  return c;
}

absl::StatusOr<std::vector<kernels::Tensor*>> ModelStageRunner::Slots(model::GptChunk* c,
                                                                      int microbatch) {
  std::vector<kernels::Tensor*> slots;
  PT_RETURN_IF_ERROR(
      c->ForEachStashedTensor(Global(microbatch), [&](kernels::Tensor* t) { slots.push_back(t); }));
  return slots;
}

int64_t ModelStageRunner::activation_bytes() const {
  int64_t total = 0;
  for (const auto& [stage, c] : chunks_) total += c->TotalActivationBytes();
  return total + offloads_.held_device_bytes();
}

void ModelStageRunner::Measure() { peak_bytes_ = std::max(peak_bytes_, activation_bytes()); }

void ModelStageRunner::ComputeEnded(bool forward) {
  // F: its stash counts from its start in the model, so the sample includes the copies still
  // held during it; then wait for the copies and release them. B/W/BW: their stash changes
  // happen at their end together with the release, frees first, so release, then sample.
  if (forward) Measure();
  offloads_.ReleaseAtComputeEnd();
  if (!forward) Measure();
}

absl::Status ModelStageRunner::BeginStep(int step) {
  step_ = step;
  if (!optimizer_steps_known_) {
    optimizer_steps_ = step;
    optimizer_steps_known_ = true;
  }
  data_.clear();
  losses_.clear();
  for (auto& [stage, c] : chunks_) PT_RETURN_IF_ERROR(c->ZeroGrad());
  return absl::OkStatus();
}

absl::StatusOr<kernels::Tensor> ModelStageRunner::Forward(int stage, int microbatch,
                                                          kernels::Tensor input) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  model::ForwardInput in;
  if (c->spec().has_embedding || c->spec().has_head) {
    auto it = data_.find(microbatch);
    if (it == data_.end()) {
      if (!config_.data) return absl::FailedPreconditionError("no data source on this worker");
      PT_ASSIGN_OR_RETURN(MicrobatchData d, config_.data(step_, Global(microbatch)));
      it = data_.emplace(microbatch, std::move(d)).first;
    }
    if (c->spec().has_embedding) in.tokens = it->second.tokens;
    if (c->spec().has_head) {
      in.targets = it->second.targets;
      in.loss_scale = 1.0f / static_cast<float>(config_.num_microbatches);
    }
  }
  in.activation = std::move(input);
  PT_ASSIGN_OR_RETURN(model::ForwardOutput out, c->Forward(Global(microbatch), std::move(in)));
  if (c->spec().has_head) {
    losses_[Global(microbatch)] = out.loss;
  }
  ComputeEnded(/*forward=*/true);
  return std::move(out.activation);
}

absl::StatusOr<kernels::Tensor> ModelStageRunner::BackwardInput(int stage, int microbatch,
                                                                kernels::Tensor grad_output) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, ResidentChunk(stage, microbatch, "backward"));
  PT_ASSIGN_OR_RETURN(kernels::Tensor grad,
                      c->BackwardInput(Global(microbatch), std::move(grad_output)));
  ComputeEnded(/*forward=*/false);
  return grad;
}

absl::Status ModelStageRunner::BackwardWeight(int stage, int microbatch) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, ResidentChunk(stage, microbatch, "weight backward"));
  PT_RETURN_IF_ERROR(c->BackwardWeight(Global(microbatch)));
  ComputeEnded(/*forward=*/false);
  return absl::OkStatus();
}

absl::StatusOr<kernels::Tensor> ModelStageRunner::Backward(int stage, int microbatch,
                                                           kernels::Tensor grad_output) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, ResidentChunk(stage, microbatch, "backward"));
  PT_ASSIGN_OR_RETURN(kernels::Tensor grad,
                      c->Backward(Global(microbatch), std::move(grad_output)));
  ComputeEnded(/*forward=*/false);
  return grad;
}

absl::Status ModelStageRunner::Offload(int stage, int microbatch, bool explicit_release) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  PT_ASSIGN_OR_RETURN(std::vector<kernels::Tensor*> slots, Slots(c, microbatch));
  PT_ASSIGN_OR_RETURN(const int64_t bytes,
                      offloads_.Offload(stage, microbatch, slots, explicit_release));
  offloaded_bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status ModelStageRunner::Release(int stage, int microbatch) {
  return offloads_.Release(stage, microbatch).status();
}

absl::Status ModelStageRunner::Reload(int stage, int microbatch) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  PT_ASSIGN_OR_RETURN(std::vector<kernels::Tensor*> slots, Slots(c, microbatch));
  PT_RETURN_IF_ERROR(offloads_.Reload(stage, microbatch, slots));
  Measure();
  return absl::OkStatus();
}

absl::Status ModelStageRunner::CheckNoneInFlight() {
  for (auto& [stage, c] : chunks_) {
    if (!c->InFlightMicrobatches().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", stage, " still holds activations of ", c->InFlightMicrobatches().size(),
          " microbatch(es) at the end of the step (a W or BW is missing)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<model::Parameter*> ModelStageRunner::RemoteTiedParameter() {
  model::GptChunk* first = chunk(0);
  model::GptChunk* last = chunk(config_.num_stages - 1);
  if (!config_.model.tie_embeddings || (first == nullptr) == (last == nullptr)) {
    return absl::FailedPreconditionError(
        "no tied embedding shared with another worker (the tie is off, or this worker holds both "
        "copies or neither)");
  }
  return first != nullptr ? first->tied_embedding() : last->tied_head_copy();
}

absl::StatusOr<std::vector<float>> ModelStageRunner::TiedGradient() {
  PT_RETURN_IF_ERROR(CheckNoneInFlight());
  PT_ASSIGN_OR_RETURN(model::Parameter * p, RemoteTiedParameter());
  return backend_->ToVector(p->grad);
}

absl::Status ModelStageRunner::AddTiedGradient(const std::vector<float>& other) {
  PT_ASSIGN_OR_RETURN(model::Parameter * p, RemoteTiedParameter());
  PT_ASSIGN_OR_RETURN(kernels::Tensor t,
                      backend_->FromHost(p->grad.shape(), other, "tied embedding gradient"));
  return backend_->AddInPlace(t, &p->grad);
}

absl::StatusOr<bool> ModelStageRunner::SumGradientSquares() {
  // A missing W would leave gradients incomplete: say so rather than sum them.
  PT_RETURN_IF_ERROR(CheckNoneInFlight());
  // Tied embeddings with both copies here: one sum, in both (the reference's wte + head).
  model::GptChunk* first = chunk(0);
  model::GptChunk* last = chunk(config_.num_stages - 1);
  if (config_.model.tie_embeddings && first != nullptr && last != nullptr) {
    if (first == last) {
      PT_RETURN_IF_ERROR(first->TieGradients());
    } else {
      model::Parameter* wte = first->tied_embedding();
      model::Parameter* copy = last->tied_head_copy();
      PT_RETURN_IF_ERROR(backend_->AddInPlace(copy->grad, &wte->grad));
      PT_RETURN_IF_ERROR(backend_->Copy(wte->grad, &copy->grad));
    }
  }
  grad_squares_.clear();
  for (auto& [stage, c] : chunks_) {
    PT_ASSIGN_OR_RETURN(grad_squares_[stage], c->GradientSquares());
  }
  return true;
}

absl::StatusOr<double> ModelStageRunner::AddGradientSquares(int stage, double running) {
  auto it = grad_squares_.find(stage);
  if (it == grad_squares_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", stage, ": no gradient squares (not on this worker, or not summed this step)"));
  }
  return model::AddSquaresLastFirst(it->second, running);
}

absl::Status ModelStageRunner::ApplyUpdate(float scale) {
  for (auto& [stage, c] : chunks_) {
    if (scale != 1.0f) PT_RETURN_IF_ERROR(c->ScaleGradients(scale));
    PT_RETURN_IF_ERROR(c->OptimizerStep(config_.optimizer, optimizer_steps_));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepEnd> ModelStageRunner::EndStep(std::optional<GradientNormPart> norm) {
  PT_RETURN_IF_ERROR(offloads_.EndStep());
  PT_RETURN_IF_ERROR(CheckNoneInFlight());
  if (open_update_ != OpenUpdate::kNone) {
    return absl::FailedPreconditionError("the previous step's update was never settled");
  }
  if (!norm.has_value()) {
    return absl::FailedPreconditionError("EndStep needs the step's gradient norm");
  }
  ++optimizer_steps_;
  StepEnd end;
  const double max_norm = config_.optimizer.clip_grad_norm;
  const model::ClipVerdict known = model::DecideClip(norm->sum_squares, max_norm);
  if (norm->complete) {
    end.verdict = known;
    ++update_counts_.final_at_step_end;
    if (known.finite) PT_RETURN_IF_ERROR(ApplyUpdate(known.scale));
  } else if (!known.finite) {
    open_update_ = OpenUpdate::kSkipped;
    ++update_counts_.skipped_early;
  } else if (known.clipped) {
    open_update_ = OpenUpdate::kDeferred;
    ++update_counts_.deferred;
  } else {
    for (auto& [stage, c] : chunks_) {
      PT_RETURN_IF_ERROR(c->SaveOptimizerState(&saved_state_[stage]));
    }
    PT_RETURN_IF_ERROR(ApplyUpdate(1.0f));
    open_update_ = OpenUpdate::kSpeculated;
    ++update_counts_.speculated;
  }
  if (!losses_.empty()) {
    // The same arithmetic, in the same order, as the reference trainer: sum of loss / m.
    double loss = 0;
    for (const auto& [mb, l] : losses_) loss += l / config_.num_microbatches;
    end.loss = loss;
  }
  return end;
}

absl::Status ModelStageRunner::SettleUpdate(double sum_squares) {
  const model::ClipVerdict verdict =
      model::DecideClip(sum_squares, config_.optimizer.clip_grad_norm);
  const OpenUpdate open = open_update_;
  open_update_ = OpenUpdate::kNone;
  switch (open) {
    case OpenUpdate::kNone:
      return absl::FailedPreconditionError("SettleUpdate: no update is open");
    case OpenUpdate::kSpeculated:
      if (verdict.finite && !verdict.clipped) return absl::OkStatus();
      for (auto& [stage, c] : chunks_) {
        PT_RETURN_IF_ERROR(c->RestoreOptimizerState(saved_state_[stage]));
      }
      ++update_counts_.rolled_back;
      return verdict.finite ? ApplyUpdate(verdict.scale) : absl::OkStatus();
    case OpenUpdate::kDeferred:
    case OpenUpdate::kSkipped:
      // A partial sum is a lower bound of the whole: what it made certain must hold (another
      // rank's NaN may still turn a deferred update into a skipped one).
      if (open == OpenUpdate::kDeferred ? verdict.finite && !verdict.clipped : verdict.finite) {
        return absl::InternalError(absl::StrCat(
            "the step's gradient norm verdict (sum of squares ", sum_squares,
            ") contradicts this worker's partial sum"));
      }
      return open == OpenUpdate::kDeferred && verdict.finite ? ApplyUpdate(verdict.scale)
                                                             : absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ModelStageRunner::StageGradients(int stage) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  return c->FlatGradients();
}

absl::Status ModelStageRunner::ResumeStageGradients(int stage, absl::Span<const float> sum,
                                                    int next_microbatch) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  return c->ResumeGradientsAt(sum, next_microbatch);
}

std::map<int, double> ModelStageRunner::TakeStepLosses() { return std::exchange(losses_, {}); }

void ModelStageRunner::AddStepLosses(const std::map<int, double>& losses) {
  losses_.insert(losses.begin(), losses.end());
}

absl::Status ModelStageRunner::BeginValidation(int completed_steps) {
  PT_RETURN_IF_ERROR(CheckNoneInFlight());
  validation_step_ = completed_steps;
  validation_inputs_.clear();
  validation_losses_.clear();
  return absl::OkStatus();
}

absl::StatusOr<kernels::Tensor> ModelStageRunner::ValidationForward(int stage, int microbatch,
                                                                    kernels::Tensor input) {
  PT_ASSIGN_OR_RETURN(model::GptChunk * c, Chunk(stage));
  model::ForwardInput in;
  if (c->spec().has_embedding || c->spec().has_head) {
    auto it = validation_inputs_.find(microbatch);
    if (it == validation_inputs_.end()) {
      if (!config_.validation_data) {
        return absl::FailedPreconditionError("no validation data on this worker");
      }
      PT_ASSIGN_OR_RETURN(MicrobatchData d, config_.validation_data(validation_step_, microbatch));
      it = validation_inputs_.emplace(microbatch, std::move(d)).first;
    }
    if (c->spec().has_embedding) in.tokens = it->second.tokens;
    if (c->spec().has_head) in.targets = it->second.targets;
  }
  in.activation = std::move(input);
  absl::StatusOr<model::ForwardOutput> out = c->Forward(microbatch, std::move(in));
  c->Discard(microbatch);  // nothing is kept for a backward
  if (!out.ok()) return out.status();
  if (c->spec().has_head) validation_losses_[microbatch] = out->loss;
  return std::move(out->activation);
}

absl::StatusOr<std::optional<double>> ModelStageRunner::EndValidation() {
  validation_inputs_.clear();
  if (validation_losses_.empty()) return std::optional<double>();
  if (static_cast<int>(validation_losses_.size()) != config_.validation_batches) {
    return absl::FailedPreconditionError(
        absl::StrCat("the last stage scored ", validation_losses_.size(),
                     " validation microbatch(es), expected ", config_.validation_batches));
  }
  // ReferenceTrainer::Validate's arithmetic, in the same order: sum of loss / M.
  double loss = 0;
  for (const auto& [mb, l] : validation_losses_) loss += l / config_.validation_batches;
  validation_losses_.clear();
  return std::optional<double>(loss);
}

absl::Status ModelStageRunner::SaveCheckpoint(const std::string& dir, int64_t step) {
  if (open_update_ != OpenUpdate::kNone) {
    return absl::FailedPreconditionError(
        "SaveCheckpoint: the last step's update is not settled yet (its verdict has not arrived)");
  }
  for (auto& [stage, c] : chunks_) {
    PT_RETURN_IF_ERROR(model::SaveChunkCheckpoint(*c, optimizer_steps_,
                                                  model::StageCheckpointPath(dir, step, stage)));
  }
  return absl::OkStatus();
}

absl::Status ModelStageRunner::LoadCheckpoint(const std::string& dir, int64_t step) {
  for (auto& [stage, c] : chunks_) {
    const std::string path = model::StageCheckpointPath(dir, step, stage);
    PT_ASSIGN_OR_RETURN(const int64_t optimizer_step, model::LoadChunkCheckpoint(path, *c));
    if (optimizer_step != step) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", path, ": holds the state after ", optimizer_step,
                       " optimizer steps, but the run resumes at step ", step));
    }
  }
  optimizer_steps_ = step;
  optimizer_steps_known_ = true;
  return absl::OkStatus();
}

}  // namespace pipetrain::worker
