#include "worker/model/gpt_chunk.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::model {

using kernels::Location;
using kernels::Tensor;

absl::StatusOr<std::unique_ptr<GptChunk>> GptChunk::Create(kernels::Backend* backend,
                                                           const GptConfig& config,
                                                           const ChunkSpec& spec,
                                                           const ChunkOptions& options) {
  PT_RETURN_IF_ERROR(config.Validate());
  PT_RETURN_IF_ERROR(ValidateChunkSpec(config, spec));
  std::unique_ptr<GptChunk> c(new GptChunk(backend, config, spec, options));
  if (spec.has_embedding) {
    PT_ASSIGN_OR_RETURN(c->embedding_, EmbeddingLayer::Create(backend, config, options.seed));
  }
  for (int b = spec.first_block; b < spec.end_block(); ++b) {
    PT_ASSIGN_OR_RETURN(auto block, TransformerBlock::Create(backend, config, b, options.seed));
    c->blocks_.push_back(std::move(block));
  }
  if (spec.has_head) {
    PT_ASSIGN_OR_RETURN(c->head_, LmHead::Create(backend, config, options.seed));
  }
  return c;
}

void GptChunk::MicrobatchState::ForEachTensor(const std::function<void(Tensor*)>& fn) {
  embed.ForEachTensor(fn);
  for (auto& b : blocks) b.ForEachTensor(fn);
  head.ForEachTensor(fn);
}

absl::StatusOr<GptChunk::MicrobatchState*> GptChunk::Find(int mb, MicrobatchPhase want,
                                                          const char* action) {
  auto it = states_.find(mb);
  if (it == states_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(action, " for microbatch ", mb, ": no forward pass stored"));
  }
  MicrobatchState* st = it->second.get();
  if (st->offloaded) {
    return absl::FailedPreconditionError(
        absl::StrCat(action, " for microbatch ", mb, ": activations are offloaded; Reload first"));
  }
  if (st->phase != want) {
    return absl::FailedPreconditionError(
        absl::StrCat(action, " for microbatch ", mb, ": wrong phase (",
                     st->phase == MicrobatchPhase::kForwardDone ? "after F" : "after B", ")"));
  }
  return st;
}

absl::StatusOr<ForwardOutput> GptChunk::Forward(int mb, ForwardInput in) {
  if (states_.count(mb) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("F for microbatch ", mb, ": already in flight"));
  }
  const int64_t T = config_.seq_len, H = config_.hidden;
  auto st = std::make_unique<MicrobatchState>();
  st->blocks.resize(blocks_.size());
  Tensor x;
  int64_t n = 0;
  if (spec_.has_embedding) {
    n = static_cast<int64_t>(in.tokens.size());
    PT_ASSIGN_OR_RETURN(x, embedding_->Forward(in.tokens, &st->embed));
  } else {
    if (in.activation.empty() || in.activation.location() != Location::kDevice ||
        in.activation.numel() % (T * H) != 0 || in.activation.numel() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "F for microbatch ", mb, ": input activation must be a device tensor of [batch*", T, ", ",
          H, "], got ", in.activation.DebugString()));
    }
    n = in.activation.numel() / H;
    x = std::move(in.activation);
    x.Reshape({n, H});
  }
  const int64_t batch = n / T;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    PT_ASSIGN_OR_RETURN(x, blocks_[i]->Forward(std::move(x), batch, &st->blocks[i]));
  }
  ForwardOutput out;
  if (spec_.has_head) {
    if (static_cast<int64_t>(in.targets.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "F for microbatch ", mb, ": ", in.targets.size(), " targets for ", n, " positions"));
    }
    PT_ASSIGN_OR_RETURN(auto head_out,
                        head_->Forward(std::move(x), in.targets, in.loss_scale, &st->head));
    out.loss = head_out.loss;
    out.valid_targets = head_out.valid_targets;
    out.predictions = std::move(head_out.predictions);
  } else {
    out.activation = std::move(x);
  }
  PT_RETURN_IF_ERROR(NarrowStash(st.get()));
  st->phase = MicrobatchPhase::kForwardDone;
  states_[mb] = std::move(st);
  return out;
}

absl::Status GptChunk::NarrowStash(MicrobatchState* st) {
  if (!options_.stash_bf16) return absl::OkStatus();
  absl::Status status;
  st->ForEachTensor([&](Tensor* t) {
    if (!status.ok() || t->empty() || t->rank() < 2 || t->dtype() != kernels::DType::kF32) return;
    absl::StatusOr<Tensor> narrow = backend_->ToBf16(*t, "bf16 stash");
    if (!narrow.ok()) {
      status = narrow.status();
      return;
    }
    *t = *std::move(narrow);
  });
  return status;
}

absl::Status GptChunk::WidenStash(MicrobatchState* st) {
  if (!options_.stash_bf16) return absl::OkStatus();
  absl::Status status;
  st->ForEachTensor([&](Tensor* t) {
    if (!status.ok() || t->empty() || t->dtype() != kernels::DType::kBF16) return;
    absl::StatusOr<Tensor> wide = backend_->ToF32(*t, "stash widened for a pass");
    if (!wide.ok()) {
      status = wide.status();
      return;
    }
    *t = *std::move(wide);
  });
  return status;
}

absl::StatusOr<Tensor> GptChunk::BackwardInput(int mb, Tensor grad_output) {
  PT_ASSIGN_OR_RETURN(MicrobatchState * st, Find(mb, MicrobatchPhase::kForwardDone, "B"));
  PT_RETURN_IF_ERROR(WidenStash(st));
  Tensor dx;
  if (spec_.has_head) {
    if (!grad_output.empty()) {
      return absl::InvalidArgumentError("B on the last chunk takes no output gradient");
    }
    PT_ASSIGN_OR_RETURN(dx, head_->BackwardInput(&st->head));
  } else {
    if (grad_output.empty() || grad_output.location() != Location::kDevice) {
      return absl::InvalidArgumentError(
          absl::StrCat("B for microbatch ", mb, ": output gradient must be a device tensor"));
    }
    dx = std::move(grad_output);
    if (dx.numel() % config_.hidden != 0 ||
        !dx.Reshape({dx.numel() / config_.hidden, config_.hidden})) {
      return absl::InvalidArgumentError("B: output gradient is not [tokens, hidden]");
    }
  }
  for (size_t i = blocks_.size(); i-- > 0;) {
    PT_ASSIGN_OR_RETURN(dx, blocks_[i]->BackwardInput(std::move(dx), &st->blocks[i]));
  }
  if (spec_.has_embedding) {
    PT_RETURN_IF_ERROR(embedding_->BackwardInput(std::move(dx), &st->embed));
    dx = Tensor();
  }
  PT_RETURN_IF_ERROR(NarrowStash(st));
  st->phase = MicrobatchPhase::kBackwardInputDone;
  return dx;
}

absl::Status GptChunk::RunWeightGrads(MicrobatchState* st, const std::vector<Tensor*>& grads,
                                      bool accumulate) {
  size_t next = 0;
  auto take = [&](size_t n) {
    absl::Span<Tensor* const> s(grads.data() + next, n);
    next += n;
    return s;
  };
  if (spec_.has_embedding) {
    PT_RETURN_IF_ERROR(embedding_->BackwardWeight(&st->embed, take(2), accumulate));
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {
    PT_RETURN_IF_ERROR(blocks_[i]->BackwardWeight(&st->blocks[i], take(12), accumulate));
  }
  if (spec_.has_head) PT_RETURN_IF_ERROR(head_->BackwardWeight(&st->head, take(3), accumulate));
  return absl::OkStatus();
}

absl::Status GptChunk::BackwardWeight(int mb) {
  PT_ASSIGN_OR_RETURN(MicrobatchState * st, Find(mb, MicrobatchPhase::kBackwardInputDone, "W"));
  PT_RETURN_IF_ERROR(WidenStash(st));
  std::vector<Parameter*> params = parameters();
  if (options_.grad_accumulation == GradAccumulation::kDirect) {
    std::vector<Tensor*> grads;
    for (Parameter* p : params) grads.push_back(&p->grad);
    PT_RETURN_IF_ERROR(RunWeightGrads(st, grads, /*accumulate=*/true));
  } else {
    if (mb < next_grad_mb_ || pending_grads_.count(mb) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "W for microbatch ", mb, ": its gradients were already accumulated this step"));
    }
    std::vector<Tensor> scratch;
    std::vector<Tensor*> grads;
    scratch.reserve(params.size());
    for (Parameter* p : params) {
      PT_ASSIGN_OR_RETURN(Tensor t, backend_->Empty(p->grad.shape(), "W scratch gradient"));
      scratch.push_back(std::move(t));
    }
    for (Tensor& t : scratch) grads.push_back(&t);
    PT_RETURN_IF_ERROR(RunWeightGrads(st, grads, /*accumulate=*/false));
    pending_grads_[mb] = std::move(scratch);
    PT_RETURN_IF_ERROR(DrainOrderedGrads());
  }
  states_.erase(mb);
  return absl::OkStatus();
}

absl::Status GptChunk::DrainOrderedGrads() {
  std::vector<Parameter*> params = parameters();
  for (auto it = pending_grads_.find(next_grad_mb_); it != pending_grads_.end();
       it = pending_grads_.find(next_grad_mb_)) {
    for (size_t i = 0; i < params.size(); ++i) {
      PT_RETURN_IF_ERROR(backend_->AddInPlace(it->second[i], &params[i]->grad));
    }
    pending_grads_.erase(it);
    ++next_grad_mb_;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> GptChunk::Backward(int mb, Tensor grad_output) {
  PT_ASSIGN_OR_RETURN(Tensor dx, BackwardInput(mb, std::move(grad_output)));
  PT_RETURN_IF_ERROR(BackwardWeight(mb));
  return dx;
}

MicrobatchPhase GptChunk::phase(int mb) const {
  auto it = states_.find(mb);
  return it == states_.end() ? MicrobatchPhase::kNone : it->second->phase;
}

std::vector<int> GptChunk::InFlightMicrobatches() const {
  std::vector<int> out;
  for (const auto& [mb, st] : states_) out.push_back(mb);
  return out;
}

int64_t GptChunk::ActivationBytes(int mb) const {
  auto it = states_.find(mb);
  if (it == states_.end()) return 0;
  int64_t bytes = 0;
  it->second->ForEachTensor([&](Tensor* t) {
    if (!t->empty() && t->location() == Location::kDevice) bytes += t->bytes();
  });
  return bytes;
}

int64_t GptChunk::OffloadedBytes(int mb) const {
  auto it = states_.find(mb);
  if (it == states_.end()) return 0;
  int64_t bytes = 0;
  it->second->ForEachTensor([&](Tensor* t) {
    if (!t->empty() && t->location() == Location::kHost) bytes += t->bytes();
  });
  return bytes;
}

int64_t GptChunk::TotalActivationBytes() const {
  int64_t total = 0;
  for (const auto& [mb, st] : states_) total += ActivationBytes(mb);
  return total;
}

bool GptChunk::IsOffloaded(int mb) const {
  auto it = states_.find(mb);
  return it != states_.end() && it->second->offloaded;
}

absl::Status GptChunk::Offload(int mb) {
  auto it = states_.find(mb);
  if (it == states_.end()) {
    return absl::NotFoundError(absl::StrCat("Offload: microbatch ", mb, " is not in flight"));
  }
  if (it->second->offloaded) {
    return absl::FailedPreconditionError(
        absl::StrCat("Offload: microbatch ", mb, " already offloaded"));
  }
  absl::Status status;
  it->second->ForEachTensor([&](Tensor* t) {
    if (!status.ok() || t->empty() || t->location() != Location::kDevice) return;
    auto host = backend_->CopyToHost(*t, absl::StrCat("offloaded activation mb ", mb));
    if (!host.ok()) {
      status = host.status();
      return;
    }
    *t = *std::move(host);
  });
  // On failure the stash is partly on the host; mark it offloaded so Reload can restore it.
  it->second->offloaded = true;
  return status;
}

absl::Status GptChunk::Reload(int mb) {
  auto it = states_.find(mb);
  if (it == states_.end()) {
    return absl::NotFoundError(absl::StrCat("Reload: microbatch ", mb, " is not in flight"));
  }
  if (!it->second->offloaded) {
    return absl::FailedPreconditionError(
        absl::StrCat("Reload: microbatch ", mb, " is not offloaded"));
  }
  absl::Status status;
  it->second->ForEachTensor([&](Tensor* t) {
    if (!status.ok() || t->empty() || t->location() != Location::kHost) return;
    auto dev = backend_->CopyToDevice(*t, absl::StrCat("reloaded activation mb ", mb));
    if (!dev.ok()) {
      status = dev.status();
      return;
    }
    *t = *std::move(dev);
  });
  if (status.ok()) it->second->offloaded = false;
  return status;
}

absl::Status GptChunk::ForEachStashedTensor(int mb, const std::function<void(Tensor*)>& fn) {
  auto it = states_.find(mb);
  if (it == states_.end()) {
    return absl::NotFoundError(absl::StrCat("microbatch ", mb, " is not in flight"));
  }
  it->second->ForEachTensor([&](Tensor* t) {
    if (!t->empty()) fn(t);
  });
  return absl::OkStatus();
}

void GptChunk::Discard(int mb) { states_.erase(mb); }

absl::StatusOr<std::vector<float>> GptChunk::OutputProbabilities(int mb, int64_t row) {
  if (!spec_.has_head) {
    return absl::FailedPreconditionError("OutputProbabilities: this chunk has no LM head");
  }
  PT_ASSIGN_OR_RETURN(MicrobatchState * st,
                      Find(mb, MicrobatchPhase::kForwardDone, "OutputProbabilities"));
  const kernels::Tensor& probs = st->head.probs;
  const int64_t rows = probs.numel() / config_.vocab;
  if (row < 0 || row >= rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("OutputProbabilities: row ", row, " is outside 0..", rows - 1));
  }
  PT_ASSIGN_OR_RETURN(std::vector<float> all, backend_->ToVector(probs));
  return std::vector<float>(all.begin() + row * config_.vocab,
                            all.begin() + (row + 1) * config_.vocab);
}

std::vector<Parameter*> GptChunk::parameters() {
  std::vector<Parameter*> out;
  if (embedding_) {
    for (Parameter* p : embedding_->params()) out.push_back(p);
  }
  for (auto& b : blocks_) {
    for (Parameter* p : b->params()) out.push_back(p);
  }
  if (head_) {
    for (Parameter* p : head_->params()) out.push_back(p);
  }
  return out;
}

absl::Status GptChunk::ZeroGrad() {
  for (Parameter* p : parameters()) PT_RETURN_IF_ERROR(backend_->Fill(0.0f, &p->grad));
  pending_grads_.clear();
  next_grad_mb_ = 0;
  return absl::OkStatus();
}

absl::Status GptChunk::CheckNoBufferedGrads(const char* op) const {
  if (!pending_grads_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(op, ": W of microbatch ", next_grad_mb_,
                                                      " has not run; ", pending_grads_.size(),
                                                      " later microbatches are buffered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> GptChunk::FlatGradients() {
  PT_RETURN_IF_ERROR(CheckNoBufferedGrads("FlatGradients"));
  std::vector<Parameter*> params = parameters();
  int64_t total = 0;
  for (Parameter* p : params) total += p->grad.numel();
  std::vector<float> flat(static_cast<size_t>(total));
  int64_t at = 0;
  for (Parameter* p : params) {
    PT_RETURN_IF_ERROR(backend_->Download(
        p->grad, absl::MakeSpan(flat.data() + at, static_cast<size_t>(p->grad.numel()))));
    at += p->grad.numel();
  }
  return flat;
}

absl::Status GptChunk::ResumeGradientsAt(absl::Span<const float> flat, int next_microbatch) {
  std::vector<Parameter*> params = parameters();
  int64_t total = 0;
  for (Parameter* p : params) total += p->grad.numel();
  if (static_cast<int64_t>(flat.size()) != total) {
    return absl::InvalidArgumentError(absl::StrCat("ResumeGradientsAt: ", flat.size(),
                                                   " values for ", total, " gradient elements"));
  }
  if (!pending_grads_.empty() && pending_grads_.begin()->first < next_microbatch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ResumeGradientsAt: microbatch ", pending_grads_.begin()->first,
        " is buffered but the given sum already covers microbatches 0..", next_microbatch - 1));
  }
  int64_t at = 0;
  for (Parameter* p : params) {
    PT_RETURN_IF_ERROR(backend_->Upload(flat.subspan(at, p->grad.numel()), &p->grad));
    at += p->grad.numel();
  }
  next_grad_mb_ = next_microbatch;
  return DrainOrderedGrads();
}

absl::StatusOr<bool> GptChunk::GradientsFinite() {
  PT_RETURN_IF_ERROR(CheckNoBufferedGrads("GradientsFinite"));
  std::vector<const Tensor*> grads;
  for (Parameter* p : parameters()) grads.push_back(&p->grad);
  return backend_->AllFinite(grads);
}

absl::StatusOr<std::vector<double>> GptChunk::GradientSquares() {
  PT_RETURN_IF_ERROR(CheckNoBufferedGrads("GradientSquares"));
  std::vector<double> squares;
  const Parameter* copy = tied_head_copy();
  for (Parameter* p : parameters()) {
    if (p == copy) {
      squares.push_back(0.0);  // x + 0.0 == x: the running sum is unchanged
      continue;
    }
    PT_ASSIGN_OR_RETURN(const double s, backend_->SumOfSquares(p->grad));
    squares.push_back(s);
  }
  return squares;
}

Parameter* GptChunk::tied_embedding() {
  return config_.tie_embeddings && embedding_ ? embedding_->params().front() : nullptr;
}

Parameter* GptChunk::tied_head_copy() {
  return config_.tie_embeddings && head_ ? head_->projection() : nullptr;
}

absl::Status GptChunk::TieGradients() {
  Parameter* wte = tied_embedding();
  Parameter* copy = tied_head_copy();
  if (wte == nullptr || copy == nullptr) return absl::OkStatus();
  PT_RETURN_IF_ERROR(CheckNoBufferedGrads("TieGradients"));
  PT_RETURN_IF_ERROR(backend_->AddInPlace(copy->grad, &wte->grad));
  return backend_->Copy(wte->grad, &copy->grad);
}

absl::Status GptChunk::ScaleGradients(float scale) {
  for (Parameter* p : parameters()) PT_RETURN_IF_ERROR(backend_->Scale(scale, &p->grad));
  return absl::OkStatus();
}

absl::Status GptChunk::SaveOptimizerState(std::vector<Tensor>* copy) {
  const std::vector<Parameter*> params = parameters();
  if (copy->empty()) {
    for (Parameter* p : params) {
      for (const Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
        PT_ASSIGN_OR_RETURN(Tensor c, backend_->Empty(t->shape(), "optimizer state copy"));
        copy->push_back(std::move(c));
      }
    }
  }
  if (copy->size() != 3 * params.size()) {
    return absl::InvalidArgumentError("SaveOptimizerState: the copy belongs to another chunk");
  }
  size_t i = 0;
  for (Parameter* p : params) {
    for (const Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
      PT_RETURN_IF_ERROR(backend_->Copy(*t, &(*copy)[i++]));
    }
  }
  return absl::OkStatus();
}

absl::Status GptChunk::RestoreOptimizerState(const std::vector<Tensor>& copy) {
  const std::vector<Parameter*> params = parameters();
  if (copy.size() != 3 * params.size()) {
    return absl::InvalidArgumentError("RestoreOptimizerState: the copy belongs to another chunk");
  }
  size_t i = 0;
  for (Parameter* p : params) {
    for (Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
      PT_RETURN_IF_ERROR(backend_->Copy(copy[i++], t));
    }
  }
  return absl::OkStatus();
}

absl::Status GptChunk::OptimizerStep(const OptimizerSettings& settings, int64_t step) {
  PT_RETURN_IF_ERROR(CheckNoBufferedGrads("OptimizerStep"));
  for (Parameter* p : parameters()) {
    const kernels::AdamWConfig c = AdamWForStep(settings, p->kind, step);
    PT_RETURN_IF_ERROR(backend_->AdamWUpdate(c, step, p->grad, &p->value, &p->adam_m, &p->adam_v));
  }
  return absl::OkStatus();
}

absl::Status GptChunk::OptimizerStep(const kernels::AdamWConfig& config, int64_t step) {
  OptimizerSettings settings;
  settings.adamw = config;
  return OptimizerStep(settings, step);
}

int64_t GptChunk::ParameterStateBytes() {
  int64_t total = 0;
  for (Parameter* p : parameters()) total += 4 * p->value.bytes();
  return total;
}

}  // namespace pipetrain::model
