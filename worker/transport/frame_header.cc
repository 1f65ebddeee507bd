#include "worker/transport/frame_header.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pipetrain::worker {

absl::Status CheckSendable(const Message& message, int64_t max_message_bytes) {
  if (message.shape.size() > kMaxFrameDims) {
    return absl::InvalidArgumentError(absl::StrCat(ToString(message.key), ": tensor rank ",
                                                   message.shape.size(), " exceeds ",
                                                   kMaxFrameDims));
  }
  int64_t elements = 1;
  for (int64_t d : message.shape) elements *= d;
  if (elements != static_cast<int64_t>(message.data.size())) {
    return absl::InvalidArgumentError(absl::StrCat(ToString(message.key), ": shape holds ",
                                                   elements, " elements but ",
                                                   message.data.size(), " were given"));
  }
  if (message.bytes() > max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(ToString(message.key), ": ", message.bytes(),
                                                   " bytes exceed the limit of ",
                                                   max_message_bytes));
  }
  return absl::OkStatus();
}

FrameHeader MessageHeader(const Message& message) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.flags = kFrameHasMessage;
  h.role = static_cast<uint8_t>(message.key.role);
  h.ndim = static_cast<uint8_t>(message.shape.size());
  h.step = message.key.step;
  h.stage = message.key.stage;
  h.microbatch = message.key.microbatch;
  for (size_t i = 0; i < message.shape.size() && i < kMaxFrameDims; ++i) {
    h.shape[i] = message.shape[i];
  }
  h.payload_bytes = static_cast<uint64_t>(message.bytes());
  return h;
}

FrameHeader EmptyHeader(bool bye) {
  FrameHeader h{};
  h.magic = bye ? kByeMagic : kFrameMagic;
  return h;
}

bool HasMessage(const FrameHeader& header) {
  return header.magic == kFrameMagic && (header.flags & kFrameHasMessage) != 0;
}

absl::Status CheckReceivedHeader(const FrameHeader& h, int64_t max_message_bytes,
                                 absl::string_view from) {
  if (h.magic != kFrameMagic && h.magic != kByeMagic) {
    return absl::DataLossError(absl::StrCat("malformed frame header from ", from));
  }
  if (!HasMessage(h)) return absl::OkStatus();
  if (h.ndim > kMaxFrameDims || (h.role != static_cast<uint8_t>(TensorRole::kActivation) &&
                                 h.role != static_cast<uint8_t>(TensorRole::kGradient) &&
                                 h.role != static_cast<uint8_t>(TensorRole::kStepStatus) &&
                                 h.role != static_cast<uint8_t>(TensorRole::kTiedGradient) &&
                                 h.role != static_cast<uint8_t>(TensorRole::kReplicaGradient) &&
                                 h.role != static_cast<uint8_t>(TensorRole::kReplicaLoss))) {
    return absl::DataLossError(absl::StrCat("malformed frame header from ", from));
  }
  int64_t elements = 1;
  bool shape_ok = true;
  for (int i = 0; i < h.ndim; ++i) {
    // Bounded before multiplying, so the product cannot overflow into a plausible size.
    if (h.shape[i] < 0 || h.shape[i] > max_message_bytes) shape_ok = false;
    elements *= shape_ok ? h.shape[i] : 1;
  }
  if (!shape_ok || h.payload_bytes > static_cast<uint64_t>(max_message_bytes) ||
      h.payload_bytes != static_cast<uint64_t>(elements) * sizeof(float)) {
    return absl::DataLossError(absl::StrCat("mis-sized tensor from ", from, " (",
                                            ToString(KeyOf(h)), "): ", h.payload_bytes,
                                            " payload bytes for its shape"));
  }
  return absl::OkStatus();
}

MessageKey KeyOf(const FrameHeader& h) {
  return MessageKey{h.step, h.stage, h.microbatch, static_cast<TensorRole>(h.role)};
}

std::vector<int64_t> ShapeOf(const FrameHeader& h) {
  return std::vector<int64_t>(h.shape, h.shape + std::min<int>(h.ndim, kMaxFrameDims));
}

}  // namespace pipetrain::worker
