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
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/crc32.h"
#include "common/status_macros.h"
#include "model/stage_checkpoint_file.h"

namespace pipetrain::model {
namespace {



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

absl::Status WriteBody(GptChunk& chunk, int64_t optimizer_step, FileWriter& w) {
  PT_RETURN_IF_ERROR(w.Write(kStageCheckpointMagic, sizeof(kStageCheckpointMagic)));
  PT_RETURN_IF_ERROR(w.Put<uint32_t>(kStageCheckpointVersion));
  for (int32_t f : StageCheckpointModelFields(chunk.config(), chunk.spec())) {
    PT_RETURN_IF_ERROR(w.Put(f));
  }
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
  const int64_t total = w.written() + static_cast<int64_t>(kStageCheckpointTrailerBytes);
  PT_RETURN_IF_ERROR(w.Put<int64_t>(total));
  const uint32_t crc = w.crc();
  PT_RETURN_IF_ERROR(w.Put<uint32_t>(crc));
  return w.Write(kStageCheckpointEndMagic, sizeof(kStageCheckpointEndMagic));
}

}  // namespace

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
  PT_ASSIGN_OR_RETURN(const StageCheckpointFile file, StageCheckpointFile::Open(path));
  if (StageCheckpointModelFields(file.config(), file.spec()) !=
      StageCheckpointModelFields(chunk.config(), chunk.spec())) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, ": holds model ", file.config().DebugString(), " chunk ",
                     file.spec().DebugString(), ", but this chunk is model ",
                     chunk.config().DebugString(), " chunk ", chunk.spec().DebugString()));
  }
  std::vector<Parameter*> params = chunk.parameters();
  const std::vector<StageCheckpointFile::Parameter>& stored = file.parameters();
  if (stored.size() != params.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, ": ", stored.size(), " parameters, the chunk has ", params.size()));
  }
  // Check everything first; touch the chunk only once all is valid.
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const StageCheckpointFile::Parameter& s = stored[i];
    if (s.name != p.name || s.global_layer != p.global_layer || s.shape != p.value.shape()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", path, ": parameter ", i, " is ", s.name, "@",
                       s.global_layer, " ", kernels::ShapeString(s.shape), ", the chunk expects ",
                       p.name, "@", p.global_layer, " ", kernels::ShapeString(p.value.shape())));
    }
  }
  kernels::Backend* backend = chunk.backend();
  using Part = StageCheckpointFile::Part;
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter* p = params[i];
    PT_RETURN_IF_ERROR(backend->Upload(file.Read(stored[i], Part::kValue), &p->value));
    PT_RETURN_IF_ERROR(backend->Upload(file.Read(stored[i], Part::kAdamM), &p->adam_m));
    PT_RETURN_IF_ERROR(backend->Upload(file.Read(stored[i], Part::kAdamV), &p->adam_v));
  }
  PT_RETURN_IF_ERROR(chunk.ZeroGrad());
  return file.optimizer_step();
}

}  // namespace pipetrain::model
