// The exported model (docs/export.md): how pipetrain's parameters are named and laid out in a
// safetensors file (GPT-2's names, as in Hugging Face's GPT-2 checkpoints) and the metadata that
// describes the model and its tokenizer. `pipetrain export` writes it, `model.init_from` and
// `pipetrain generate` read it back.
//
// Names and layout (H = hidden, F = ffn, V = vocab, T = seq_len, b = block index):
//   wte.weight [V, H], wpe.weight [T, H]
//   h.b.ln_1.weight / .bias [H]                   (LayerNorm gain / shift)
//   h.b.attn.c_attn.weight [H, 3H], .bias [3H]    (columns: q | k | v, heads contiguous in each)
//   h.b.attn.c_proj.weight [H, H], .bias [H]
//   h.b.ln_2.weight / .bias [H]
//   h.b.mlp.c_fc.weight [H, F], .bias [F]
//   h.b.mlp.c_proj.weight [F, H], .bias [H]
//   ln_f.weight / .bias [H]
//   lm_head.weight [V, H]
// The block matrices are stored [in, out] (y = x W + b), GPT-2's Conv1D convention, which is
// pipetrain's own layout, so they are copied as they are. The LM head, which pipetrain keeps as
// [H, V], is written transposed to [V, H] (a torch Linear's [out, in], the shape of wte): the
// head is not tied to wte, so it is a tensor of its own.
//
// Thread-safety: free functions.
#ifndef PIPETRAIN_MODEL_EXPORTED_MODEL_H_
#define PIPETRAIN_MODEL_EXPORTED_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gpt_config.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::model {

// Where one of pipetrain's parameters goes in the exported file.
struct ExportedTensor {
  std::string name;            // e.g. "h.3.attn.c_attn.weight"
  bool transposed = false;     // stored as the transpose of pipetrain's 2-D layout
};

// The exported name of parameter `param` (its Parameter::name) of global layer `global_layer`
// (GptConfig's numbering). InvalidArgument for a parameter this mapping does not know.
absl::StatusOr<ExportedTensor> ExportedTensorFor(const GptConfig& config, int global_layer,
                                                 const std::string& param);
// The exported shape of a parameter of pipetrain shape `shape`.
std::vector<int64_t> ExportedShape(const ExportedTensor& tensor, const std::vector<int64_t>& shape);
// `rows` x `cols` row-major -> its transpose (cols x rows).
std::vector<float> Transposed(const std::vector<float>& values, int64_t rows, int64_t cols);

// ---- Metadata (the safetensors "__metadata__", strings only) ----
// The model's shape under GPT-2's config names: n_layer, n_embd, n_head, n_inner, n_positions,
// vocab_size; plus layer_norm_epsilon, activation_function, tie_word_embeddings and "format":
// "pt" (what Hugging Face's loaders look for).
inline constexpr char kMetaTokenizer[] = "pipetrain.tokenizer";
// The tokenizers a model can name in kMetaTokenizer:
//   "chars": token i is the i-th character of kMetaVocabulary (the embedded addition task:
//            "0123456789+=", answers written least significant digit first);
//   "bytes": token i is the byte i (the "text" source);
//   "sentencepiece": a SentencePiece model (the "tokens" source), kept in a tokenizer.model
//            file beside the export, whose CRC-32 is kMetaTokenizerCrc32.
inline constexpr char kTokenizerChars[] = "chars";
inline constexpr char kTokenizerBytes[] = "bytes";
inline constexpr char kTokenizerSentencePiece[] = "sentencepiece";
inline constexpr char kMetaVocabulary[] = "pipetrain.vocabulary";
inline constexpr char kMetaTokenizerCrc32[] = "pipetrain.tokenizer_crc32";
inline constexpr char kMetaDataSource[] = "pipetrain.data_source";
inline constexpr char kMetaStep[] = "pipetrain.step";
inline constexpr char kMetaJob[] = "pipetrain.job";
// The embedded addition task's vocabulary (worker/data/addition_task.h numbers it the same way).
inline constexpr char kAdditionVocabulary[] = "0123456789+=";

// The metadata describing `config` and the tokenizer of `spec`'s data source (without the
// tokenizer CRC, which the caller adds for "sentencepiece").
std::map<std::string, std::string> ExportMetadata(const GptConfig& config,
                                                  const v1::JobSpec& spec);
// The model shape a file's metadata states. InvalidArgument naming the missing or bad key.
absl::StatusOr<GptConfig> ConfigFromMetadata(const std::map<std::string, std::string>& metadata);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_EXPORTED_MODEL_H_
