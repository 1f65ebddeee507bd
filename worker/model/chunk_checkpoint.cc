#include "worker/model/chunk_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/atomic_file.h"
#include "common/crc32.h"
#include "common/status_macros.h"

namespace pipetrain::model {
namespace {

constexpr char kMagic[8] = {'P', 'T', 'C', 'K', 'P', 'T', '\r', '\n'};
constexpr char kEndMagic[8] = {'P', 'T', 'C', 'K', 'E', 'N', 'D', '\n'};
constexpr uint32_t kVersion = 1;
constexpr size_t kTrailerBytes = 8 + 4 + 8;


// Appends to a file descriptor, keeping a running CRC and byte count.
class FileWriter {
 public:
  FileWriter(int fd, const std::string& path, int64_t abandon_after)
      : fd_(fd), path_(path), abandon_after_(abandon_after) {}

  absl::Status Write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    if (abandon_after_ >= 0 && written_ + static_cast<int64_t>(n) > abandon_after_) {
      n = static_cast<size_t>(abandon_after_ - written_);
      abandoned_ = true;
    }
    crc_ = Crc32(crc_, p, n);
    written_ += static_cast<int64_t>(n);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return absl::InternalError(absl::StrCat("checkpoint ", path_, ": write: ", ErrnoText()));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    if (abandoned_) {
      return absl::AbortedError(
          absl::StrCat("checkpoint ", path_, ": abandoned after ", written_, " bytes (testing)"));
    }
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Put(T v) {
    return Write(&v, sizeof(v));
  }
  uint32_t crc() const { return crc_; }
  int64_t written() const { return written_; }

 private:
  int fd_;
  const std::string& path_;
  int64_t abandon_after_;
  bool abandoned_ = false;
  uint32_t crc_ = 0;
  int64_t written_ = 0;
};

// Bounds-checked reads from an in-memory file image.
class Reader {
 public:
  Reader(absl::string_view data, const std::string& path) : data_(data), path_(path) {}
  absl::Status Read(void* out, size_t n) {
    if (data_.size() - pos_ < n) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", path_, ": truncated (field at byte ", pos_, ")"));
    }
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<T> Get() {
    T v;
    PT_RETURN_IF_ERROR(Read(&v, sizeof(v)));
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  absl::string_view data_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::array<int32_t, 10> ModelFields(const GptConfig& c, const ChunkSpec& s) {
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

absl::Status WriteBody(GptChunk& chunk, int64_t optimizer_step, FileWriter& w) {
  PT_RETURN_IF_ERROR(w.Write(kMagic, sizeof(kMagic)));
  PT_RETURN_IF_ERROR(w.Put<uint32_t>(kVersion));
  for (int32_t f : ModelFields(chunk.config(), chunk.spec())) PT_RETURN_IF_ERROR(w.Put(f));
  PT_RETURN_IF_ERROR(w.Put<uint64_t>(CheckpointFingerprint(chunk.config(), chunk.spec())));
  PT_RETURN_IF_ERROR(w.Put<int64_t>(optimizer_step));
  std::vector<Parameter*> params = chunk.parameters();
  PT_RETURN_IF_ERROR(w.Put<uint32_t>(static_cast<uint32_t>(params.size())));
  kernels::Backend* backend = chunk.backend();
  std::vector<float> host;
  for (Parameter* p : params) {
    PT_RETURN_IF_ERROR(w.Put<uint32_t>(static_cast<uint32_t>(p->name.size())));
    PT_RETURN_IF_ERROR(w.Write(p->name.data(), p->name.size()));
    PT_RETURN_IF_ERROR(w.Put<int32_t>(p->global_layer));
    PT_RETURN_IF_ERROR(w.Put<uint32_t>(static_cast<uint32_t>(p->value.shape().size())));
    for (int64_t d : p->value.shape()) PT_RETURN_IF_ERROR(w.Put<int64_t>(d));
    for (const kernels::Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
      host.resize(static_cast<size_t>(t->numel()));
      PT_RETURN_IF_ERROR(backend->Download(*t, absl::MakeSpan(host)));
      PT_RETURN_IF_ERROR(w.Write(host.data(), host.size() * sizeof(float)));
    }
  }
  const int64_t total = w.written() + static_cast<int64_t>(kTrailerBytes);
  PT_RETURN_IF_ERROR(w.Put<int64_t>(total));
  const uint32_t crc = w.crc();
  PT_RETURN_IF_ERROR(w.Put<uint32_t>(crc));
  return w.Write(kEndMagic, sizeof(kEndMagic));
}

}  // namespace

uint64_t CheckpointFingerprint(const GptConfig& config, const ChunkSpec& spec) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (int32_t f : ModelFields(config, spec)) {
    for (size_t i = 0; i < sizeof(f); ++i) {
      h ^= static_cast<uint8_t>(static_cast<uint32_t>(f) >> (8 * i));
      h *= 1099511628211ull;
    }
  }
  return h;
}

absl::Status SaveChunkCheckpoint(GptChunk& chunk, int64_t optimizer_step, const std::string& path,
                                 const CheckpointWriteOptions& options) {
  static std::atomic<int64_t> counter{0};
  const std::filesystem::path final_path(path);
  std::string dir = final_path.parent_path().string();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("checkpoint ", path, ": create directory ", dir, ": ", ec.message()));
  }
  const std::string temp = absl::StrCat(path, ".tmp-", ::getpid(), "-", counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("checkpoint ", path, ": create ", temp, ": ", ErrnoText()));
  }
  FileWriter writer(fd, path, options.abandon_after_bytes);
  absl::Status status = WriteBody(chunk, optimizer_step, writer);
  if (absl::IsAborted(status)) {  // testing: leave the temp behind, like a killed writer
    ::close(fd);
    return status;
  }
  if (status.ok() && ::fsync(fd) != 0) {
    status = absl::InternalError(absl::StrCat("checkpoint ", path, ": fsync: ", ErrnoText()));
  }
  if (::close(fd) != 0 && status.ok()) {
    status = absl::InternalError(absl::StrCat("checkpoint ", path, ": close: ", ErrnoText()));
  }
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat("checkpoint ", path, ": rename: ", ErrnoText()));
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return FsyncDirectory(dir, absl::StrCat("checkpoint ", path));
}

absl::StatusOr<int64_t> LoadChunkCheckpoint(const std::string& path, GptChunk& chunk) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint ", path, ": cannot open"));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::InternalError(absl::StrCat("checkpoint ", path, ": read error"));
  if (data.size() < sizeof(kMagic) + kTrailerBytes ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path,
                                            ": not a pipetrain chunk checkpoint (bad magic or ",
                                            data.size(), " bytes)"));
  }
  // Trailer: length, CRC, end magic.
  const char* trailer = data.data() + data.size() - kTrailerBytes;
  int64_t total = 0;
  uint32_t stored_crc = 0;
  std::memcpy(&total, trailer, 8);
  std::memcpy(&stored_crc, trailer + 8, 4);
  if (std::memcmp(trailer + 12, kEndMagic, sizeof(kEndMagic)) != 0 ||
      total != static_cast<int64_t>(data.size())) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": truncated or incomplete (",
                                            data.size(), " bytes, no valid trailer)"));
  }
  const uint32_t crc = Crc32(0, data.data(), data.size() - 12);
  if (crc != stored_crc) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": checksum mismatch (stored ",
                                            stored_crc, ", computed ", crc, "): corrupted"));
  }

  Reader r(absl::string_view(data.data(), data.size() - kTrailerBytes), path);
  char magic[8];
  PT_RETURN_IF_ERROR(r.Read(magic, sizeof(magic)));
  PT_ASSIGN_OR_RETURN(const uint32_t version, r.Get<uint32_t>());
  if (version != kVersion) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, ": format version ",
                                                      version, ", this build reads ", kVersion));
  }
  std::array<int32_t, 10> fields;
  for (int32_t& f : fields) {
    PT_ASSIGN_OR_RETURN(f, r.Get<int32_t>());
  }
  const std::array<int32_t, 10> want = ModelFields(chunk.config(), chunk.spec());
  if (fields != want) {
    GptConfig c{fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]};
    ChunkSpec s{fields[6], fields[7], fields[8] != 0, fields[9] != 0};
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, ": holds model ", c.DebugString(), " chunk ",
                     s.DebugString(), ", but this chunk is model ", chunk.config().DebugString(),
                     " chunk ", chunk.spec().DebugString()));
  }
  PT_ASSIGN_OR_RETURN(const uint64_t fingerprint, r.Get<uint64_t>());
  if (fingerprint != CheckpointFingerprint(chunk.config(), chunk.spec())) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, ": config fingerprint mismatch"));
  }
  PT_ASSIGN_OR_RETURN(const int64_t optimizer_step, r.Get<int64_t>());
  std::vector<Parameter*> params = chunk.parameters();
  PT_ASSIGN_OR_RETURN(const uint32_t count, r.Get<uint32_t>());
  if (count != params.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, ": ", count, " parameters, the chunk has ", params.size()));
  }
  // Parse and check everything into host memory first; touch the chunk only once all is valid.
  std::vector<std::array<std::vector<float>, 3>> host(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    PT_ASSIGN_OR_RETURN(const uint32_t name_len, r.Get<uint32_t>());
    if (name_len > 4096) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": bad name length"));
    }
    std::string name(name_len, '\0');
    PT_RETURN_IF_ERROR(r.Read(name.data(), name_len));
    PT_ASSIGN_OR_RETURN(const int32_t layer, r.Get<int32_t>());
    PT_ASSIGN_OR_RETURN(const uint32_t rank, r.Get<uint32_t>());
    if (rank > 8) return absl::DataLossError(absl::StrCat("checkpoint ", path, ": bad rank"));
    kernels::Shape shape(rank);
    for (int64_t& d : shape) {
      PT_ASSIGN_OR_RETURN(d, r.Get<int64_t>());
    }
    if (name != p.name || layer != p.global_layer || shape != p.value.shape()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", path, ": parameter ", i, " is ", name, "@", layer, " ",
                       kernels::ShapeString(shape), ", the chunk expects ", p.name, "@",
                       p.global_layer, " ", kernels::ShapeString(p.value.shape())));
    }
    for (auto& v : host[i]) {
      v.resize(static_cast<size_t>(p.value.numel()));
      PT_RETURN_IF_ERROR(r.Read(v.data(), v.size() * sizeof(float)));
    }
  }
  if (r.pos() != data.size() - kTrailerBytes) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ",
                                            data.size() - kTrailerBytes - r.pos(),
                                            " unexpected bytes after the last parameter"));
  }
  kernels::Backend* backend = chunk.backend();
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter* p = params[i];
    PT_RETURN_IF_ERROR(backend->Upload(host[i][0], &p->value));
    PT_RETURN_IF_ERROR(backend->Upload(host[i][1], &p->adam_m));
    PT_RETURN_IF_ERROR(backend->Upload(host[i][2], &p->adam_v));
  }
  PT_RETURN_IF_ERROR(chunk.ZeroGrad());
  return optimizer_step;
}

}  // namespace pipetrain::model
