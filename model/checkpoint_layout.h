// The directory layout of a pipeline's checkpoints and the manifest that marks one complete;
// shared by the workers (which write stage files) and the coordinator (which commits, resumes
// from and prunes them). No model weights are read here: the file format of one stage is
// worker/model/chunk_checkpoint.h.
//
//   <dir>/step-<N>/stage-<s>.ckpt   one file per pipeline stage; N = completed training steps,
//                                   i.e. the step a resumed run starts at
//   <dir>/MANIFEST                  the newest step known complete
//
// Thread-safety: free functions; one process (the coordinator) owns the manifest and pruning of
// a checkpoint directory.
#ifndef PIPETRAIN_MODEL_CHECKPOINT_LAYOUT_H_
#define PIPETRAIN_MODEL_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pipetrain::model {

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
// Keeps the newest `keep_last` (>= 1; InvalidArgument otherwise) complete checkpoints at or below the manifest's step
// and deletes every other step directory at or below it (older complete ones, and incomplete
// leftovers such as a killed writer's temp files). Never touches steps newer than the manifest
// (they may be being written) nor the manifest's own step. Without a manifest nothing is
// deleted. Returns the deleted steps, ascending.
absl::StatusOr<std::vector<int64_t>> PruneCheckpoints(const std::string& dir, int keep_last);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_CHECKPOINT_LAYOUT_H_
