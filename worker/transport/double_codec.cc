#include "worker/transport/double_codec.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

std::vector<float> EncodeDoubles(absl::Span<const double> values) {
  std::vector<float> out;
  out.reserve(values.size() * 4);
  for (const double value : values) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<float>((bits >> (16 * i)) & 0xFFFF));
  }
  return out;
}

absl::StatusOr<std::vector<double>> DecodeDoubles(const Message& message) {
  if (message.data.size() % 4 != 0) {
    return absl::DataLossError(absl::StrCat(ToString(message.key), ": ", message.data.size(),
                                            " values, not a multiple of 4"));
  }
  std::vector<double> out;
  out.reserve(message.data.size() / 4);
  for (size_t v = 0; v < message.data.size(); v += 4) {
    uint64_t bits = 0;
    for (int i = 0; i < 4; ++i) {
      const float piece = message.data[v + i];
      if (!(piece >= 0.0f && piece <= 65535.0f) ||
          piece != static_cast<float>(static_cast<int>(piece))) {
        return absl::DataLossError(absl::StrCat(ToString(message.key), ": malformed value"));
      }
      bits |= static_cast<uint64_t>(piece) << (16 * i);
    }
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    out.push_back(value);
  }
  return out;
}

}  // namespace pipetrain::worker
