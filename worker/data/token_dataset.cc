#include "worker/data/token_dataset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pipetrain::data {
namespace {

// Little-endian ids, whatever the host's byte order.
inline uint32_t LoadU16(const unsigned char* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8; }
inline uint32_t LoadU32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

template <uint32_t (*Load)(const unsigned char*), int kBytes>
uint32_t MaxId(const unsigned char* data, int64_t n) {
  uint32_t max = 0;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, Load(data + i * kBytes));
  return max;
}

// Only when the maximum is out of range (the fast scan above is all a good file pays): how many
// ids are, and the first.
template <uint32_t (*Load)(const unsigned char*), int kBytes>
absl::Status ReportBadIds(const std::string& path, const unsigned char* data, int64_t n,
                          uint32_t vocab) {
  int64_t bad = 0, first = -1;
  uint32_t first_id = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t id = Load(data + i * kBytes);
    if (id < vocab) continue;
    if (bad++ == 0) {
      first = i;
      first_id = id;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": ", bad, " of its ", n, " ids are >= model.vocab_size (", vocab, "); the first, ",
      first_id, ", is id number ", first, " (byte offset ", first * kBytes, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenDataset>> TokenDataset::Open(const std::string& path,
                                                                 const Options& options) {
  if (options.seq_len <= 0 || options.vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": seq_len (", options.seq_len,
                                                   ") and vocab_size (", options.vocab_size,
                                                   ") must be >= 1"));
  }
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  const int width = model::TokenDtypeBytes(options.dtype);
  const char* dtype = model::TokenDtypeName(options.dtype);
  if (file->size() % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": has ", file->size(), " bytes, not a whole number of ", dtype,
                     " ids (", width, " bytes each); is training.data.token_dtype right?"));
  }
  const int64_t n = file->size() / width;
  if (n < int64_t{options.seq_len} + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has ", n, " ids; one window needs model.seq_len + 1 = ", options.seq_len + 1));
  }
  const uint32_t vocab = static_cast<uint32_t>(options.vocab_size);
  const bool narrow = options.dtype == model::TokenDtype::kUint16;
  const uint32_t max =
      narrow ? MaxId<LoadU16, 2>(file->data(), n) : MaxId<LoadU32, 4>(file->data(), n);
  if (max >= vocab) {
    return narrow ? ReportBadIds<LoadU16, 2>(path, file->data(), n, vocab)
                  : ReportBadIds<LoadU32, 4>(path, file->data(), n, vocab);
  }
  return std::unique_ptr<TokenDataset>(new TokenDataset(*std::move(file), options, n));
}

int32_t TokenDataset::token(int64_t i) const {
  // Below vocab_size (checked at Open), so it fits.
  return static_cast<int32_t>(options_.dtype == model::TokenDtype::kUint16
                                  ? LoadU16(file_.data() + i * 2)
                                  : LoadU32(file_.data() + i * 4));
}

Microbatch TokenDataset::Get(int64_t step, int microbatch, int microbatch_size) const {
  Microbatch mb;
  mb.microbatch_size = microbatch_size;
  mb.seq_len = options_.seq_len;
  mb.tokens.reserve(static_cast<size_t>(microbatch_size) * options_.seq_len);
  mb.targets.reserve(mb.tokens.capacity());
  // Window starts 0 .. num_tokens - seq_len - 1: the window of seq_len + 1 ids fits.
  const uint64_t starts = static_cast<uint64_t>(num_tokens_ - options_.seq_len);  // >= 1
  for (int s = 0; s < microbatch_size; ++s) {
    const int64_t off =
        static_cast<int64_t>(MixSeed(options_.seed, static_cast<uint64_t>(step),
                                     static_cast<uint64_t>(microbatch), static_cast<uint64_t>(s)) %
                             starts);
    for (int t = 0; t < options_.seq_len; ++t) {
      mb.tokens.push_back(token(off + t));
      mb.targets.push_back(token(off + t + 1));
    }
  }
  return mb;
}

}  // namespace pipetrain::data
