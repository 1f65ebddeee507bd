// `pipetrain export` without the coordinator: gathers every stage's weights of one checkpoint
// step (model/checkpoint_layout.h) into a single safetensors file with GPT-2 tensor names and
// the model's config in its metadata (model/exported_model.h, docs/export.md). The checkpoint
// directory must be readable from this process. Stage files are mapped, and tensors are
// written one at a time, so memory stays near the largest tensor.
//
// Thread-safety: a free function.
#ifndef PIPETRAIN_CLIENT_MODEL_EXPORT_H_
#define PIPETRAIN_CLIENT_MODEL_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "pipetrain/v1/job.pb.h"

namespace pipetrain::client {

struct ExportRequest {
  std::string job_id;        // recorded in the metadata
  v1::JobSpec spec;          // with defaults filled (the coordinator's Job.spec)
  int num_stages = 0;        // the plan's stages; 0: the manifest's
  int64_t step = 0;          // 0: the newest complete checkpoint
  std::string output;        // the .safetensors file to write
};

struct ExportResult {
  int64_t step = 0;
  int64_t tensors = 0;
  int64_t parameters = 0;      // scalars written
  std::string tokenizer_path;  // the tokenizer.model copied beside the output, if any
};

// Errors: FailedPrecondition when the job has no checkpoint directory, the step does not exist
// (listing the complete ones) or is incomplete (naming the missing stage file or tensor), or the
// files hold another model than the spec's; the stage file errors (DataLoss for a corrupted
// file) with the file named; Internal for a failed write.
absl::StatusOr<ExportResult> ExportCheckpoint(const ExportRequest& request);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_MODEL_EXPORT_H_
