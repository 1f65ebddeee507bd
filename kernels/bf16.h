// bf16 on the host: the upper 16 bits of an fp32 value, rounded to nearest even (what CUDA's
// __float2bfloat16_rn does for finite values; a NaN stays a quiet NaN of the same sign). The CPU
// backend's bf16 stash and its emulated bf16 GEMM inputs use these, so a CPU bf16 job rounds
// exactly where a CUDA one does.
// Thread-safety: pure functions.
#ifndef PIPETRAIN_KERNELS_BF16_H_
#define PIPETRAIN_KERNELS_BF16_H_

#include <cstdint>
#include <cstring>

namespace pipetrain::kernels {

inline uint16_t FloatToBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: keep it a (quiet) NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float Bf16BitsToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// value rounded to the nearest bf16, as an fp32.
inline float RoundToBf16(float value) { return Bf16BitsToFloat(FloatToBf16Bits(value)); }

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_BF16_H_
