#include "worker/model/exported_weights.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/exported_model.h"

namespace pipetrain::model {

absl::Status LoadExportedWeights(const SafetensorsFile& file, GptChunk& chunk,
                                 const std::string& field) {
  const std::vector<Parameter*> params = chunk.parameters();
  std::vector<const SafetensorsFile::Tensor*> sources;
  std::vector<ExportedTensor> names;
  for (const Parameter* p : params) {
    PT_ASSIGN_OR_RETURN(ExportedTensor exported,
                        ExportedTensorFor(chunk.config(), p->global_layer, p->name));
    const std::vector<int64_t> want = ExportedShape(exported, p->value.shape());
    const SafetensorsFile::Tensor* t = file.Find(exported.name);
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", file.path(), " has no tensor ", exported.name,
                       ", which the job's model (", chunk.config().DebugString(), ") needs with shape ",
                       TensorShapeString(want)));
    }
    if (t->shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", file.path(), ": tensor ", exported.name, " has shape ",
          TensorShapeString(t->shape), ", the job's model needs ", TensorShapeString(want)));
    }
    sources.push_back(t);
    names.push_back(std::move(exported));
  }
  kernels::Backend* backend = chunk.backend();
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter* p = params[i];
    std::vector<float> values = file.Values(*sources[i]);
    if (names[i].transposed && p->value.shape().size() == 2) {
      // Stored [cols, rows] for our [rows, cols].
      values = Transposed(values, p->value.shape()[1], p->value.shape()[0]);
    }
    PT_RETURN_IF_ERROR(backend->Upload(values, &p->value));
  }
  return chunk.ZeroGrad();
}

absl::Status LoadExportedWeights(const std::string& path, absl::Span<GptChunk* const> chunks,
                                 const std::string& field) {
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(field, ": ", file.status().message()));
  }
  for (GptChunk* chunk : chunks) PT_RETURN_IF_ERROR(LoadExportedWeights(*file, *chunk, field));
  return absl::OkStatus();
}

}  // namespace pipetrain::model
