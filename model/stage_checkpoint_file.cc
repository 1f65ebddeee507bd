#include "model/stage_checkpoint_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32.h"
#include "common/status_macros.h"

namespace pipetrain::model {
namespace {

// Bounds-checked little-endian reads from the mapped bytes [0, end).
class Cursor {
 public:
  Cursor(const unsigned char* data, size_t end, const std::string& path)
      : data_(data), end_(end), path_(path) {}
  absl::Status Skip(size_t n) {
    if (end_ - pos_ < n) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", path_, ": truncated (field at byte ", pos_, ")"));
    }
    pos_ += n;
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<T> Get() {
    const size_t at = pos_;
    PT_RETURN_IF_ERROR(Skip(sizeof(T)));
    T v;
    std::memcpy(&v, data_ + at, sizeof(T));
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  const unsigned char* data_;
  size_t end_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::array<int32_t, 10> StageCheckpointModelFields(const GptConfig& c, const ChunkSpec& s) {
  return {c.num_layers,
          c.hidden,
          c.heads,
          c.ffn,
          c.seq_len,
          c.vocab,
          s.first_block,
          s.num_blocks,
          static_cast<int32_t>(s.has_embedding),
          static_cast<int32_t>(s.has_head)};
}

uint64_t CheckpointFingerprint(const GptConfig& config, const ChunkSpec& spec) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (int32_t f : StageCheckpointModelFields(config, spec)) {
    for (size_t i = 0; i < sizeof(f); ++i) {
      h ^= static_cast<uint8_t>(static_cast<uint32_t>(f) >> (8 * i));
      h *= 1099511628211ull;
    }
  }
  return h;
}

absl::StatusOr<StageCheckpointFile> StageCheckpointFile::Open(const std::string& path) {
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok()) {
    if (absl::IsNotFound(mapped.status())) {
      return absl::NotFoundError(absl::StrCat("checkpoint ", path, ": cannot open"));
    }
    if (absl::IsInvalidArgument(mapped.status())) {  // empty, or not a regular file
      return absl::DataLossError(absl::StrCat("checkpoint ", mapped.status().message()));
    }
    return mapped.status();
  }
  StageCheckpointFile file(*std::move(mapped));
  const unsigned char* data = file.file_.data();
  const size_t size = static_cast<size_t>(file.file_.size());
  if (size < sizeof(kStageCheckpointMagic) + kStageCheckpointTrailerBytes ||
      std::memcmp(data, kStageCheckpointMagic, sizeof(kStageCheckpointMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, ": not a pipetrain chunk checkpoint (bad magic or ", size, " bytes)"));
  }
  const unsigned char* trailer = data + size - kStageCheckpointTrailerBytes;
  int64_t total = 0;
  uint32_t stored_crc = 0;
  std::memcpy(&total, trailer, 8);
  std::memcpy(&stored_crc, trailer + 8, 4);
  if (std::memcmp(trailer + 12, kStageCheckpointEndMagic, sizeof(kStageCheckpointEndMagic)) != 0 ||
      total != static_cast<int64_t>(size)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": truncated or incomplete (",
                                            size, " bytes, no valid trailer)"));
  }
  const uint32_t crc = Crc32(0, data, size - 12);
  if (crc != stored_crc) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": checksum mismatch (stored ",
                                            stored_crc, ", computed ", crc, "): corrupted"));
  }

  const size_t body_end = size - kStageCheckpointTrailerBytes;
  Cursor r(data, body_end, path);
  PT_RETURN_IF_ERROR(r.Skip(sizeof(kStageCheckpointMagic)));
  PT_ASSIGN_OR_RETURN(const uint32_t version, r.Get<uint32_t>());
  if (version != kStageCheckpointVersion) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, ": format version ",
                                                      version, ", this build reads ",
                                                      kStageCheckpointVersion));
  }
  std::array<int32_t, 10> f;
  for (int32_t& v : f) {
    PT_ASSIGN_OR_RETURN(v, r.Get<int32_t>());
  }
  file.config_ = GptConfig{f[0], f[1], f[2], f[3], f[4], f[5]};
  file.spec_ = ChunkSpec{f[6], f[7], f[8] != 0, f[9] != 0};
  PT_ASSIGN_OR_RETURN(const uint64_t fingerprint, r.Get<uint64_t>());
  if (fingerprint != CheckpointFingerprint(file.config_, file.spec_)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": config fingerprint mismatch"));
  }
  PT_ASSIGN_OR_RETURN(file.optimizer_step_, r.Get<int64_t>());
  PT_ASSIGN_OR_RETURN(const uint32_t count, r.Get<uint32_t>());
  for (uint32_t i = 0; i < count; ++i) {
    Parameter p;
    PT_ASSIGN_OR_RETURN(const uint32_t name_len, r.Get<uint32_t>());
    if (name_len > 4096) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": bad name length"));
    }
    const size_t name_at = r.pos();
    PT_RETURN_IF_ERROR(r.Skip(name_len));
    p.name.assign(reinterpret_cast<const char*>(data) + name_at, name_len);
    PT_ASSIGN_OR_RETURN(p.global_layer, r.Get<int32_t>());
    PT_ASSIGN_OR_RETURN(const uint32_t rank, r.Get<uint32_t>());
    if (rank > 8) return absl::DataLossError(absl::StrCat("checkpoint ", path, ": bad rank"));
    p.numel = 1;
    for (uint32_t d = 0; d < rank; ++d) {
      PT_ASSIGN_OR_RETURN(const int64_t dim, r.Get<int64_t>());
      if (dim < 0 || dim > (int64_t{1} << 40)) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": bad dimension"));
      }
      p.shape.push_back(dim);
      p.numel *= dim;
      if (p.numel > (int64_t{1} << 40)) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": bad dimension"));
      }
    }
    p.offset = static_cast<int64_t>(r.pos());
    PT_RETURN_IF_ERROR(r.Skip(3 * static_cast<size_t>(p.numel) * sizeof(float)));
    file.parameters_.push_back(std::move(p));
  }
  if (r.pos() != body_end) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", body_end - r.pos(),
                                            " unexpected bytes after the last parameter"));
  }
  return file;
}

std::vector<float> StageCheckpointFile::Read(const Parameter& p, Part part) const {
  std::vector<float> out(static_cast<size_t>(p.numel));
  const int64_t at = p.offset + static_cast<int64_t>(part) * p.numel * 4;
  std::memcpy(out.data(), file_.data() + at, out.size() * sizeof(float));
  return out;
}

}  // namespace pipetrain::model
