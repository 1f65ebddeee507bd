// Reading one stage's checkpoint file without a model: the parser shared by the workers (which
// load a file into their chunk, worker/model/chunk_checkpoint.h) and `pipetrain export` (which
// gathers every stage's weights into one file, docs/export.md). The writer is the worker's
// SaveChunkCheckpoint, which streams tensors from its device.
//
// File format (little-endian, version 1):
//   "PTCKPT\r\n" (8 bytes), u32 version, GptConfig (6 x i32), ChunkSpec (4 x i32),
//   u64 config fingerprint (FNV-1a over the config and spec fields), i64 optimizer step,
//   u32 parameter count, then per parameter: u32 name length, name, i32 global layer, u32 rank,
//   rank x i64 dims, value, adam_m, adam_v (numel floats each);
//   trailer: u64 total file length, u32 CRC-32 of every preceding byte, "PTCKEND\n".
//
// Open maps the file and validates all of it (trailer, length, checksum, version, fingerprint,
// every parameter record inside the file, nothing after the last) before returning. Errors name
// the file: NotFound (missing), DataLoss (truncated, corrupted, not a checkpoint),
// FailedPrecondition (another format version).
//
// Thread-safety: immutable after Open.
#ifndef PIPETRAIN_MODEL_STAGE_CHECKPOINT_FILE_H_
#define PIPETRAIN_MODEL_STAGE_CHECKPOINT_FILE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mapped_file.h"
#include "model/gpt_config.h"

namespace pipetrain::model {

inline constexpr char kStageCheckpointMagic[8] = {'P', 'T', 'C', 'K', 'P', 'T', '\r', '\n'};
inline constexpr char kStageCheckpointEndMagic[8] = {'P', 'T', 'C', 'K', 'E', 'N', 'D', '\n'};
inline constexpr uint32_t kStageCheckpointVersion = 1;
// u64 total length, u32 CRC, end magic.
inline constexpr size_t kStageCheckpointTrailerBytes = 8 + 4 + 8;

// The header's model fields in file order: the GptConfig's six, then the ChunkSpec's four.
std::array<int32_t, 10> StageCheckpointModelFields(const GptConfig& config, const ChunkSpec& spec);
// FNV-1a 64 over those fields (stored in the header).
uint64_t CheckpointFingerprint(const GptConfig& config, const ChunkSpec& spec);

class StageCheckpointFile {
 public:
  // Which of a parameter's three stored tensors.
  enum class Part { kValue = 0, kAdamM = 1, kAdamV = 2 };
  struct Parameter {
    std::string name;
    int global_layer = 0;
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int64_t offset = 0;  // file offset of the value; adam_m and adam_v follow it
  };

  static absl::StatusOr<StageCheckpointFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const GptConfig& config() const { return config_; }
  const ChunkSpec& spec() const { return spec_; }
  int64_t optimizer_step() const { return optimizer_step_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  // One stored tensor of `p` (copied out of the mapping, numel floats).
  std::vector<float> Read(const Parameter& p, Part part) const;

 private:
  explicit StageCheckpointFile(MappedFile file) : file_(std::move(file)) {}
  MappedFile file_;
  GptConfig config_;
  ChunkSpec spec_;
  int64_t optimizer_step_ = 0;
  std::vector<Parameter> parameters_;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_STAGE_CHECKPOINT_FILE_H_
