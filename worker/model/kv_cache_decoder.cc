#include "worker/model/kv_cache_decoder.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pipetrain::model {

using kernels::Tensor;

absl::StatusOr<std::unique_ptr<KvCacheDecoder>> KvCacheDecoder::Create(GptChunk* model) {
  const GptConfig& c = model->config();
  if (!model->spec().has_embedding || !model->spec().has_head ||
      model->spec().num_blocks != c.num_layers) {
    return absl::InvalidArgumentError("the KV cache needs the whole model in one chunk");
  }
  // parameters(): the embedding's {wte, wpe}, each block's 12, the head's {lnf g, lnf b, W}.
  const std::vector<Parameter*> params = model->parameters();
  constexpr size_t kPerBlock = 12;
  if (params.size() != 2 + kPerBlock * c.num_layers + 3) {
    return absl::InternalError(absl::StrCat("the KV cache expected ",
                                            2 + kPerBlock * c.num_layers + 3,
                                            " parameters, the chunk has ", params.size()));
  }
  std::unique_ptr<KvCacheDecoder> d(new KvCacheDecoder(model));
  d->wte_ = params[0];
  d->wpe_ = params[1];
  for (int b = 0; b < c.num_layers; ++b) {
    Parameter* const* p = params.data() + 2 + kPerBlock * b;
    d->blocks_.push_back(
        {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]});
  }
  d->lnf_g_ = params[params.size() - 3];
  d->lnf_b_ = params[params.size() - 2];
  d->head_w_ = params[params.size() - 1];
  const size_t cache = static_cast<size_t>(c.seq_len) * c.hidden;
  d->keys_.assign(c.num_layers, std::vector<float>(cache));
  d->values_.assign(c.num_layers, std::vector<float>(cache));
  return d;
}

absl::StatusOr<NextTokenDistribution> KvCacheDecoder::Append(absl::Span<const int32_t> tokens,
                                                             bool want_probs) {
  kernels::Backend& be = *model_->backend();
  const GptConfig& c = model_->config();
  const int64_t k = static_cast<int64_t>(tokens.size()), pos = length_, H = c.hidden;
  if (k == 0) return absl::InvalidArgumentError("KvCacheDecoder::Append: no tokens");
  if (pos + k > c.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("KvCacheDecoder::Append: ", pos, " cached + ",
                                                   k, " new tokens exceed seq_len ", c.seq_len));
  }
  // The embedding of the new rows: the backend's EmbeddingForward over the rows 0..pos+k-1 of
  // one sequence (the cached ids are not kept, so they are passed as 0: only the new rows are
  // used), then the new rows alone.
  std::vector<int32_t> ids(static_cast<size_t>(pos + k), 0);
  std::copy(tokens.begin(), tokens.end(), ids.begin() + pos);
  PT_ASSIGN_OR_RETURN(Tensor all, be.Empty({pos + k, H}, "kv cache embedding (scratch)"));
  PT_RETURN_IF_ERROR(be.EmbeddingForward(ids, pos + k, wte_->value, wpe_->value, &all));
  std::vector<float> host(static_cast<size_t>((pos + k) * H));
  PT_RETURN_IF_ERROR(be.Download(all, absl::MakeSpan(host)));
  PT_ASSIGN_OR_RETURN(Tensor x, be.Empty({k, H}, "kv cache x"));
  PT_RETURN_IF_ERROR(be.Upload(absl::MakeConstSpan(host).subspan(pos * H), &x));
  all.Reset();

  for (int b = 0; b < c.num_layers; ++b) {
    PT_ASSIGN_OR_RETURN(x, Block(b, std::move(x), pos));
  }
  length_ = pos + k;

  // The head on the newest row only.
  Tensor last;
  if (k == 1) {
    last = std::move(x);
  } else {
    std::vector<float> rows(static_cast<size_t>(k * H));
    PT_RETURN_IF_ERROR(be.Download(x, absl::MakeSpan(rows)));
    PT_ASSIGN_OR_RETURN(last, be.Empty({1, H}, "kv cache last row"));
    PT_RETURN_IF_ERROR(be.Upload(absl::MakeConstSpan(rows).subspan((k - 1) * H), &last));
  }
  PT_ASSIGN_OR_RETURN(Tensor lnf, be.Empty({1, H}, "kv cache lnf"));
  PT_ASSIGN_OR_RETURN(Tensor mean, be.Empty({1}, "kv cache mean"));
  PT_ASSIGN_OR_RETURN(Tensor rstd, be.Empty({1}, "kv cache rstd"));
  PT_RETURN_IF_ERROR(be.LayerNormForward(last, lnf_g_->value, lnf_b_->value, &lnf, &mean, &rstd));
  PT_ASSIGN_OR_RETURN(Tensor logits, be.Empty({1, c.vocab}, "kv cache logits"));
  PT_RETURN_IF_ERROR(be.Gemm(lnf, false, head_w_->value, c.tie_embeddings, 1, 0, &logits));
  PT_ASSIGN_OR_RETURN(Tensor probs, be.Empty({1, c.vocab}, "kv cache probs"));
  const int32_t no_target[1] = {kernels::kIgnoreTarget};
  PT_ASSIGN_OR_RETURN(const kernels::Backend::CrossEntropyResult ce,
                      be.CrossEntropyForward(logits, no_target, &probs));
  NextTokenDistribution out;
  out.argmax = ce.predictions.at(0);
  if (want_probs) {
    PT_ASSIGN_OR_RETURN(out.probs, be.ToVector(probs));
  }
  return out;
}

absl::StatusOr<Tensor> KvCacheDecoder::Block(int b, Tensor x, int64_t pos) {
  kernels::Backend& be = *model_->backend();
  const GptConfig& c = model_->config();
  const BlockWeights& w = blocks_[b];
  const int64_t k = x.dim(0), H = c.hidden, F = c.ffn;
  // As TransformerBlock::Forward, op for op, on k rows.
  PT_ASSIGN_OR_RETURN(Tensor ln1, be.Empty({k, H}, "kv cache ln1"));
  PT_ASSIGN_OR_RETURN(Tensor mean, be.Empty({k}, "kv cache mean"));
  PT_ASSIGN_OR_RETURN(Tensor rstd, be.Empty({k}, "kv cache rstd"));
  PT_RETURN_IF_ERROR(be.LayerNormForward(x, w.ln1_g->value, w.ln1_b->value, &ln1, &mean, &rstd));
  PT_ASSIGN_OR_RETURN(Tensor qkv, be.Empty({k, 3 * H}, "kv cache qkv"));
  PT_RETURN_IF_ERROR(be.Linear(ln1, w.qkv_w->value, w.qkv_b->value, nullptr, &qkv));
  std::vector<float> host_qkv(static_cast<size_t>(k * 3 * H));
  PT_RETURN_IF_ERROR(be.Download(qkv, absl::MakeSpan(host_qkv)));
  std::vector<float> host_att;
  Attend(b, host_qkv, k, pos, &host_att);
  PT_ASSIGN_OR_RETURN(Tensor att, be.Empty({k, H}, "kv cache attention"));
  PT_RETURN_IF_ERROR(be.Upload(host_att, &att));
  PT_ASSIGN_OR_RETURN(Tensor x1, be.Empty({k, H}, "kv cache x1"));
  PT_RETURN_IF_ERROR(be.Linear(att, w.proj_w->value, w.proj_b->value, &x, &x1));
  PT_ASSIGN_OR_RETURN(Tensor ln2, be.Empty({k, H}, "kv cache ln2"));
  PT_RETURN_IF_ERROR(be.LayerNormForward(x1, w.ln2_g->value, w.ln2_b->value, &ln2, &mean, &rstd));
  PT_ASSIGN_OR_RETURN(Tensor h, be.Empty({k, F}, "kv cache mlp h"));
  PT_RETURN_IF_ERROR(be.Linear(ln2, w.fc_w->value, w.fc_b->value, nullptr, &h));
  PT_ASSIGN_OR_RETURN(Tensor g, be.Empty({k, F}, "kv cache mlp gelu"));
  PT_RETURN_IF_ERROR(be.GeluForward(h, &g));
  PT_ASSIGN_OR_RETURN(Tensor x2, be.Empty({k, H}, "kv cache block output"));
  PT_RETURN_IF_ERROR(be.Linear(g, w.fc2_w->value, w.fc2_b->value, &x1, &x2));
  return x2;
}

void KvCacheDecoder::Attend(int b, const std::vector<float>& qkv, int64_t k, int64_t pos,
                            std::vector<float>* out) {
  const GptConfig& c = model_->config();
  const int64_t H = c.hidden, nh = c.heads, hd = H / nh;
  std::vector<float>& keys = keys_[b];
  std::vector<float>& values = values_[b];
  for (int64_t i = 0; i < k; ++i) {
    const float* row = qkv.data() + i * 3 * H;
    std::copy(row + H, row + 2 * H, keys.begin() + (pos + i) * H);
    std::copy(row + 2 * H, row + 3 * H, values.begin() + (pos + i) * H);
  }
  out->assign(static_cast<size_t>(k * H), 0.0f);
  // The CPU backend's AttentionForward (kernels/cpu/cpu_attention.cc) for one query row.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> p(static_cast<size_t>(pos + k));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t t = pos + i;  // the row's position: it sees positions 0..t
    for (int64_t hh = 0; hh < nh; ++hh) {
      const float* q = qkv.data() + i * 3 * H + hh * hd;
      for (int64_t j = 0; j <= t; ++j) {
        const float* key = keys.data() + j * H + hh * hd;
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * key[d];
        p[j] = scale * dot;
      }
      float mx = p[0];
      for (int64_t j = 1; j <= t; ++j) mx = p[j] > mx ? p[j] : mx;
      float sum = 0.0f;
      for (int64_t j = 0; j <= t; ++j) {
        p[j] = std::exp(p[j] - mx);
        sum += p[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j <= t; ++j) p[j] *= inv;
      float* o = out->data() + i * H + hh * hd;
      for (int64_t j = 0; j <= t; ++j) {
        const float* v = values.data() + j * H + hh * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] += p[j] * v[d];
      }
    }
  }
}

}  // namespace pipetrain::model
