// FrameHeader: the fixed 72-byte header in front of every tensor message on the wire, one
// layout for the TCP and NCCL transports, and the checks a receiver applies before it trusts
// one. A header is followed by its payload (payload_bytes of float32, row-major); where the
// checksum travels is a flag (TCP appends it after the payload, NCCL carries it in the header).
//
// Little-endian on every platform we build for (x86-64, aarch64).
//
// Thread-safety: plain values and pure functions.
#ifndef PIPETRAIN_WORKER_TRANSPORT_FRAME_HEADER_H_
#define PIPETRAIN_WORKER_TRANSPORT_FRAME_HEADER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "worker/transport/message.h"

namespace pipetrain::worker {

inline constexpr uint32_t kFrameMagic = 0x31545450;  // "PTT1"
// "BYE!": the sender closes its side (TCP: payload_bytes of text may follow, why it stopped).
inline constexpr uint32_t kByeMagic = 0x21455942;
inline constexpr int kMaxFrameDims = 4;

enum FrameFlags : uint16_t {
  kFrameHasMessage = 1,         // a tensor follows (NCCL rounds may carry none)
  kFrameChecksumTrailer = 2,    // an XXH3 of the payload follows the payload
  kFrameChecksumInHeader = 4,   // `checksum` holds the XXH3 of the payload
};

struct FrameHeader {
  uint32_t magic;
  uint8_t role;  // TensorRole
  uint8_t ndim;
  uint16_t flags;  // FrameFlags
  int32_t step;
  int32_t stage;
  int32_t microbatch;
  int32_t pad;
  int64_t shape[kMaxFrameDims];
  uint64_t payload_bytes;
  uint64_t checksum;
};
static_assert(sizeof(FrameHeader) == 72);

// InvalidArgument naming the message when a header cannot describe it: more than kMaxFrameDims
// dimensions, a shape that does not hold the data, or more than max_message_bytes.
absl::Status CheckSendable(const Message& message, int64_t max_message_bytes);
// The header announcing `message` (kFrameHasMessage; no checksum flags).
FrameHeader MessageHeader(const Message& message);
// The header of a round or stream that carries no message: a bye, or (NCCL) an empty round.
FrameHeader EmptyHeader(bool bye);

// DataLoss naming `from` unless the header is well formed: a known magic, and for a message a
// known role, at most kMaxFrameDims non-negative dimensions and payload_bytes equal to the
// shape's float32 bytes and at most max_message_bytes.
absl::Status CheckReceivedHeader(const FrameHeader& header, int64_t max_message_bytes,
                                 absl::string_view from);
bool HasMessage(const FrameHeader& header);
MessageKey KeyOf(const FrameHeader& header);
std::vector<int64_t> ShapeOf(const FrameHeader& header);

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_TRANSPORT_FRAME_HEADER_H_
