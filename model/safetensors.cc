#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pipetrain::model {
namespace {

static_assert(sizeof(float) == 4, "F32 tensors are 4-byte floats");

// The reference implementation refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

int64_t ElementCount(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string HeaderJson(const std::map<std::string, std::string>& metadata,
                       const std::vector<SafetensorsOutput>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const SafetensorsOutput& t : tensors) {
    const int64_t bytes = ElementCount(t.shape) * 4;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad so that the data section starts 8-byte aligned (8 + header length).
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

absl::Status WriteBody(int fd, const std::string& path, const std::string& header,
                       const std::vector<SafetensorsOutput>& tensors) {
  const uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  PT_RETURN_IF_ERROR(WriteAll(fd, len, sizeof(len), path));
  PT_RETURN_IF_ERROR(WriteAll(fd, header.data(), header.size(), path));
  for (const SafetensorsOutput& t : tensors) {
    PT_ASSIGN_OR_RETURN(std::vector<float> values, t.values());
    if (static_cast<int64_t>(values.size()) != ElementCount(t.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", t.name, " has ",
                                                     values.size(), " values, its shape ",
                                                     TensorShapeString(t.shape), " needs ",
                                                     ElementCount(t.shape)));
    }
    PT_RETURN_IF_ERROR(WriteAll(fd, values.data(), values.size() * sizeof(float), path));
  }
  return absl::OkStatus();
}

}  // namespace

std::string TensorShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, std::string>& metadata,
                              const std::vector<SafetensorsOutput>& tensors) {
  std::set<std::string> names;
  for (const SafetensorsOutput& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name \"", t.name, "\" is empty, reserved or repeated"));
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", t.name, " has shape ",
                                                       TensorShapeString(t.shape)));
      }
    }
  }
  const std::string header = HeaderJson(metadata, tensors);

  return WriteFileAtomically(path,
                             [&](int fd) { return WriteBody(fd, path, header, tensors); });
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  PT_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  SafetensorsFile file(std::move(mapped));
  const unsigned char* bytes = file.file_.data();
  const uint64_t size = static_cast<uint64_t>(file.file_.size());
  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a valid float32 safetensors file: ", what));
  };
  if (size < 8) return invalid(absl::StrCat("only ", size, " bytes"));
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t{bytes[i]} << (8 * i);
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    return invalid(absl::StrCat("the header length ", header_len, " does not fit the file of ",
                                size, " bytes"));
  }
  file.data_start_ = static_cast<int64_t>(8 + header_len);
  const uint64_t data_bytes = size - 8 - header_len;
  nlohmann::json header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return invalid("the header is not a JSON object");
  }
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return invalid("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return invalid(absl::StrCat("__metadata__ entry ", mk, " is not a string"));
        file.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      return invalid(absl::StrCat("tensor ", key, " lacks dtype, shape or data_offsets"));
    }
    const nlohmann::json& dtype = value["dtype"];
    if (!dtype.is_string() || dtype.get<std::string>() != "F32") {
      return invalid(absl::StrCat("tensor ", key, " has dtype ", dtype.dump(),
                                  "; only F32 is supported"));
    }
    Tensor t;
    t.name = key;
    const nlohmann::json& shape = value["shape"];
    const nlohmann::json& offsets = value["data_offsets"];
    if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2) {
      return invalid(absl::StrCat("tensor ", key, ": bad shape or data_offsets"));
    }
    uint64_t elements = 1;
    for (const nlohmann::json& d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) {
        return invalid(absl::StrCat("tensor ", key, ": bad shape ", shape.dump()));
      }
      t.shape.push_back(d.get<int64_t>());
      elements *= d.get<uint64_t>();
      if (elements > (uint64_t{1} << 40)) return invalid(absl::StrCat("tensor ", key, ": too large"));
    }
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return invalid(absl::StrCat("tensor ", key, ": bad data_offsets ", offsets.dump()));
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_bytes) {
      return invalid(absl::StrCat("tensor ", key, ": data_offsets ", offsets.dump(),
                                  " lie outside the ", data_bytes, " data bytes"));
    }
    if (end - begin != elements * 4) {
      return invalid(absl::StrCat("tensor ", key, ": shape ", TensorShapeString(t.shape),
                                  " needs ", elements * 4, " bytes, data_offsets give ",
                                  end - begin));
    }
    t.begin = static_cast<int64_t>(begin);
    t.end = static_cast<int64_t>(end);
    file.tensors_.push_back(std::move(t));
  }
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const Tensor& a, const Tensor& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  int64_t cursor = 0;
  for (const Tensor& t : file.tensors_) {
    if (t.begin != cursor) {
      return invalid(absl::StrCat("tensor ", t.name, " starts at data byte ", t.begin,
                                  ", expected ", cursor, " (tensors must tile the data)"));
    }
    cursor = t.end;
  }
  if (static_cast<uint64_t>(cursor) != data_bytes) {
    return invalid(absl::StrCat("the tensors cover ", cursor, " of the ", data_bytes,
                                " data bytes"));
  }
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.by_name_[file.tensors_[i].name] = i;
  return file;
}

const SafetensorsFile::Tensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> SafetensorsFile::Values(const Tensor& tensor) const {
  std::vector<float> values(static_cast<size_t>((tensor.end - tensor.begin) / 4));
  std::memcpy(values.data(), file_.data() + data_start_ + tensor.begin,
              static_cast<size_t>(tensor.end - tensor.begin));
  return values;
}

}  // namespace pipetrain::model
