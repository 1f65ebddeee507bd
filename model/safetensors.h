// The safetensors file format (the format of Hugging Face's `safetensors` package), float32
// tensors only, written and read here without a library:
//
//   u64 N (little-endian)  the length of the header
//   N bytes                a JSON object: for each tensor
//                            "name": {"dtype": "F32", "shape": [d0, d1, ...],
//                                     "data_offsets": [begin, end]}
//                          and "__metadata__": {"key": "value", ...} (strings only); padded
//                          with spaces so that the data starts 8-byte aligned
//   data                   the tensors' bytes, row-major little-endian; offsets count from the
//                          start of the data, and the tensors tile it without gaps or overlap
//
// `pipetrain export` writes a whole model this way (docs/export.md); `model.init_from` and
// `pipetrain generate` read it back. The reader maps the file and validates the header fully
// (JSON, dtypes, shapes against byte ranges, ranges inside the file and tiling the data), so a
// tensor's bytes can then be used without further checks.
//
// Thread-safety: free functions; a SafetensorsFile is immutable after Open.
#ifndef PIPETRAIN_MODEL_SAFETENSORS_H_
#define PIPETRAIN_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mapped_file.h"

namespace pipetrain::model {

// "[2, 3]"
std::string TensorShapeString(absl::Span<const int64_t> shape);

// One tensor to write: its name, shape and a function that produces its values (exactly the
// shape's element count, row-major), called once, in order, while the file is written.
struct SafetensorsOutput {
  std::string name;
  std::vector<int64_t> shape;
  std::function<absl::StatusOr<std::vector<float>>()> values;
};

// Writes `tensors` (data in the given order) and `metadata` to `path` atomically (a temp file
// in the same directory, fsynced, renamed over `path`). InvalidArgument for a duplicate or empty
// name, "__metadata__" as a name, or values of the wrong size; Internal for I/O errors.
absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, std::string>& metadata,
                              const std::vector<SafetensorsOutput>& tensors);

class SafetensorsFile {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    int64_t begin = 0;  // byte offsets into the data section
    int64_t end = 0;
  };

  // Maps and validates `path`. Errors start with the path: NotFound and the other errors of
  // MappedFile::Open, InvalidArgument for anything that is not a valid float32 safetensors file
  // (saying what is wrong, e.g. a dtype other than F32 or a range outside the file).
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In data order.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // nullptr if there is no tensor of that name.
  const Tensor* Find(const std::string& name) const;
  // The tensor's values (copied out of the mapping, so alignment does not matter).
  std::vector<float> Values(const Tensor& tensor) const;

 private:
  explicit SafetensorsFile(MappedFile file) : file_(std::move(file)) {}
  MappedFile file_;
  int64_t data_start_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t> by_name_;
};

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_SAFETENSORS_H_
