// Chunk checkpoints: one GptChunk's parameter values and AdamW moments, plus the number of
// optimizer steps applied, in one self-checking file. Where the files go (<dir>/step-<N>/
// stage-<s>.ckpt) and the manifest that marks a step complete are model/checkpoint_layout.h.
//
// File format: model/stage_checkpoint_file.h, whose reader the loader uses.
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
// Thread-safety: free functions; a chunk must not be used concurrently with Save/Load on it.
#ifndef PIPETRAIN_WORKER_MODEL_CHUNK_CHECKPOINT_H_
#define PIPETRAIN_WORKER_MODEL_CHUNK_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/stage_checkpoint_file.h"
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

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_CHUNK_CHECKPOINT_H_
