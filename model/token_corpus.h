// The token corpus format, shared by `pipetrain data prepare` (client/, which writes it) and the
// workers' token dataset (worker/data/, which reads it): flat files of little-endian token ids of
// a declared width, and the directory that data prepare writes:
//
//   <dir>/train.bin         the training split's ids
//   <dir>/val.bin           the validation split's ids (the input's tail; absent when empty)
//   <dir>/tokenizer.model   the SentencePiece model that encoded both
//   <dir>/meta.json         dtype, vocabulary size, token counts, the input's name and size
//
// docs/data.md describes the format. Nothing here reads or writes a file, and nothing here
// needs protobuf: the data prepare binary links this without the wire contract.
//
// Thread-safety: constants and pure functions.
#ifndef PIPETRAIN_MODEL_TOKEN_CORPUS_H_
#define PIPETRAIN_MODEL_TOKEN_CORPUS_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace pipetrain::model {

// How each token id is stored: little-endian unsigned integers of 2 or 4 bytes.
enum class TokenDtype { kUint16, kUint32 };

inline constexpr char kTokenDtypeUint16[] = "uint16";
inline constexpr char kTokenDtypeUint32[] = "uint32";
// training.data.token_dtype when the source is "tokens" and the field is unset (WithDefaults).
inline constexpr char kDefaultTokenDtype[] = "uint16";
// model.seq_len of a "tokens" job that leaves it unset (WithDefaults).
inline constexpr int kDefaultTokensSeqLen = 256;

// "uint16" or "uint32"; nullopt for anything else.
std::optional<TokenDtype> ParseTokenDtype(std::string_view name);
const char* TokenDtypeName(TokenDtype dtype);
int TokenDtypeBytes(TokenDtype dtype);
// The narrowest dtype holding every id of a vocab_size vocabulary (ids 0..vocab_size-1).
TokenDtype TokenDtypeForVocab(int64_t vocab_size);

// File names inside a directory written by `pipetrain data prepare`.
inline constexpr char kTrainTokensFile[] = "train.bin";
inline constexpr char kValTokensFile[] = "val.bin";
inline constexpr char kTokenizerFile[] = "tokenizer.model";
inline constexpr char kTokenMetaFile[] = "meta.json";

// Keys of meta.json (one JSON object).
inline constexpr char kMetaFormat[] = "format";                // kMetaFormatValue
inline constexpr char kMetaDtype[] = "dtype";                  // "uint16" | "uint32"
inline constexpr char kMetaVocabSize[] = "vocab_size";         // the tokenizer's vocabulary
inline constexpr char kMetaTrainTokens[] = "train_tokens";     // ids in train.bin
inline constexpr char kMetaValTokens[] = "val_tokens";         // ids in val.bin (0: no val.bin)
inline constexpr char kMetaInputName[] = "input_name";         // the corpus file's name
inline constexpr char kMetaInputBytes[] = "input_bytes";       // its size
inline constexpr char kMetaValStartByte[] = "val_start_byte";  // where val's text begins in it
inline constexpr char kMetaModelType[] = "model_type";         // "bpe" | "unigram"
inline constexpr char kMetaFormatValue[] = "pipetrain-tokens-v1";

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_TOKEN_CORPUS_H_
