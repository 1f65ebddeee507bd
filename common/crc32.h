// CRC-32 (IEEE 802.3, the zlib/PNG/gzip polynomial) over bytes, incremental: start with 0 and
// feed each piece with the previous result. zlib computes it; this header only spares callers
// its unsigned-char/uInt signature.
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COMMON_CRC32_H_
#define PIPETRAIN_COMMON_CRC32_H_

#include <cstddef>
#include <cstdint>

namespace pipetrain {

uint32_t Crc32(uint32_t crc, const void* data, size_t size);

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_CRC32_H_
