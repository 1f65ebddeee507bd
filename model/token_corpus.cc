#include "model/token_corpus.h"

namespace pipetrain::model {

std::optional<TokenDtype> ParseTokenDtype(std::string_view name) {
  if (name == kTokenDtypeUint16) return TokenDtype::kUint16;
  if (name == kTokenDtypeUint32) return TokenDtype::kUint32;
  return std::nullopt;
}

const char* TokenDtypeName(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? kTokenDtypeUint16 : kTokenDtypeUint32;
}

int TokenDtypeBytes(TokenDtype dtype) { return dtype == TokenDtype::kUint16 ? 2 : 4; }

TokenDtype TokenDtypeForVocab(int64_t vocab_size) {
  return vocab_size <= (int64_t{1} << 16) ? TokenDtype::kUint16 : TokenDtype::kUint32;
}

}  // namespace pipetrain::model
