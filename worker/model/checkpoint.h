// Chunk checkpoints: one GptChunk's parameter values and AdamW moments, plus the number of
// optimizer steps applied, in one self-checking file; and the directory layout of a pipeline's
// checkpoints (<dir>/step-<N>/stage-<s>.ckpt, where N is the number of completed training steps,
// i.e. the step a resumed run starts at).
//
// File format (little-endian, version 1):
//   "PTCKPT\r\n" (8 bytes), u32 version, GptConfig (6 x i32), ChunkSpec (4 x i32),
//   u64 config fingerprint (FNV-1a over the config and spec fields), i64 optimizer step,
//   u32 parameter count, then per parameter: u32 name length, name, i32 global layer, u32 rank,
//   rank x i64 dims, value, adam_m, adam_v (numel floats each);
//   trailer: u64 total file length, u32 CRC-32 of every preceding byte, "PTCKEND\n".
// Gradients are not saved (a checkpoint is taken between steps, where they are dead).
//
// Atomicity: SaveChunkCheckpoint writes a temp file in the destination directory
// (<name>.tmp-<pid>-<n>), fsyncs it, renames it over <name> and fsyncs the directory, so a
// reader sees either the previous file or the complete new one; a writer killed mid-way leaves
// only a temp file, which no loader ever opens (they open the exact final names).
//
// LoadChunkCheckpoint validates everything (trailer, length, checksum, model config, chunk spec,
// parameter names and shapes) before touching the chunk, so a rejected file leaves it unchanged.
// Errors name the file: NotFound (missing), DataLoss (truncated / corrupted / not a checkpoint),
// FailedPrecondition (a checkpoint of a different model or chunk).
//
// Thread-safety: free functions; a chunk must not be used concurrently with Save/Load on it, and
// one process (the coordinator) owns the manifest and pruning of a checkpoint directory.
#ifndef PIPETRAIN_WORKER_MODEL_CHECKPOINT_H_
#define PIPETRAIN_WORKER_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain::model {

struct CheckpointWriteOptions {
  // Testing only: stop after this many bytes of the temp file, leave it behind un-renamed (as a
  // process killed mid-write would) and return Aborted. Negative: write everything.
  int64_t abandon_after_bytes = -1;
};

// Writes `chunk`'s state after `optimizer_step` AdamW steps to `path` atomically (see above).
absl::Status SaveChunkCheckpoint(GptChunk& chunk, int64_t optimizer_step, const std::string& path,
                                 const CheckpointWriteOptions& options = {});

// Loads `path` into `chunk` (values and moments; gradients are zeroed) and returns the
// optimizer step stored in the file.
absl::StatusOr<int64_t> LoadChunkCheckpoint(const std::string& path, GptChunk& chunk);

// Fingerprint of a model config + chunk spec (stored in the header).
uint64_t CheckpointFingerprint(const GptConfig& config, const ChunkSpec& spec);

// ---- Directory layout ----
// <dir>/step-<step>
std::string CheckpointStepDir(const std::string& dir, int64_t step);
// <dir>/step-<step>/stage-<stage>.ckpt
std::string StageCheckpointPath(const std::string& dir, int64_t step, int stage);
// The largest N such that <dir>/step-N holds stage-<s>.ckpt for every s in 0..num_stages-1
// (temp files do not count); nullopt if there is none. Presence only: the files' contents are
// verified when loaded.
std::optional<int64_t> LatestCompleteCheckpointStep(const std::string& dir, int num_stages);

// ---- Manifest and retention (the coordinator's side) ----
// <dir>/MANIFEST names the newest checkpoint known complete (every rank reported writing it). It
// is written last, atomically (temp, fsync, rename, fsync dir), and is the one a resume trusts:
// step directories newer than it may be half-written. Text format, one "key value" per line:
//   pipetrain-checkpoint-manifest 1 / step N / stages S / crc32 C (of the preceding lines).
struct CheckpointManifest {
  int64_t step = 0;
  int num_stages = 0;
};
std::string CheckpointManifestPath(const std::string& dir);
// FailedPrecondition (naming the file) unless all `num_stages` stage files of step-`step` exist.
absl::Status WriteCheckpointManifest(const std::string& dir, const CheckpointManifest& manifest);
// NotFound without a manifest; DataLoss if it is malformed or its checksum does not match.
absl::StatusOr<CheckpointManifest> ReadCheckpointManifest(const std::string& dir);
// Keeps the newest `keep_last` (0 means 3) complete checkpoints at or below the manifest's step
// and deletes every other step directory at or below it (older complete ones, and incomplete
// leftovers such as a killed writer's temp files). Never touches steps newer than the manifest
// (they may be being written) nor the manifest's own step. Without a manifest nothing is
// deleted. Returns the deleted steps, ascending.
absl::StatusOr<std::vector<int64_t>> PruneCheckpoints(const std::string& dir, int keep_last);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_CHECKPOINT_H_
