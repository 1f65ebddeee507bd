#include "common/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace pipetrain {

uint32_t Crc32(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (size > 0) {  // zlib takes at most uInt bytes per call
    const size_t n = std::min<size_t>(size, std::numeric_limits<uInt>::max());
    c = ::crc32(c, p, static_cast<uInt>(n));
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace pipetrain
