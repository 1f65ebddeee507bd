// bf16: the host conversions (round to nearest even, NaN kept), the backend's stash conversions
// (ToBf16 / ToF32 on device tensors, offload copies keep the type, compute ops refuse bf16), and
// the CPU backend's bf16 GEMM (inputs rounded to bf16, products summed in f32).
#include "kernels/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace pipetrain::kernels {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16Bits(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3f818000u)), 0x3f82);
  // Just above the halfway point rounds up; just below rounds down.
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::infinity()), 0x7f80);
  // The largest finite float rounds up to infinity, as in any round-to-nearest conversion.
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::max()), 0x7f80);
  const uint16_t nan = FloatToBf16Bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(nan)));
  // A NaN whose payload sits only in the low 16 bits stays a NaN (not infinity).
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(FromBits(0x7f800001u)))));
  EXPECT_EQ(Bf16BitsToFloat(0x3f82), 1.015625f);
  EXPECT_EQ(RoundToBf16(3.14159265f), 3.140625f);
}

TEST(Bf16Test, BackendConvertsAndCopiesTheStash) {
  CpuBackend be;
  const std::vector<float> values = {1.0f, 3.14159265f, -1e-3f, 65504.0f, 0.0f, -7.5f};
  Tensor x = *be.FromHost({2, 3}, values, "x");
  const int64_t before = be.device_allocator().current_bytes();
  Tensor narrow = *be.ToBf16(x, "narrow");
  EXPECT_EQ(narrow.dtype(), DType::kBF16);
  EXPECT_EQ(narrow.shape(), x.shape());
  EXPECT_EQ(narrow.bytes(), 12);
  EXPECT_EQ(be.device_allocator().current_bytes() - before, 12);
  Tensor wide = *be.ToF32(narrow, "wide");
  EXPECT_EQ(wide.dtype(), DType::kF32);
  const std::vector<float> back = *be.ToVector(wide);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(back[i], RoundToBf16(values[i])) << i;
  EXPECT_EQ(*be.ToVector(narrow), back);  // ToVector widens a bf16 tensor itself
  // Offload and reload keep the type and the bytes.
  Tensor host = *be.CopyToHost(narrow, "offloaded");
  EXPECT_EQ(host.dtype(), DType::kBF16);
  EXPECT_EQ(be.host_allocator().current_bytes(), 12);
  EXPECT_EQ(*be.ToVector(host), back);
  Tensor reloaded = *be.CopyToDevice(host, "reloaded");
  EXPECT_EQ(reloaded.dtype(), DType::kBF16);
  EXPECT_EQ(*be.ToVector(reloaded), back);
  // Compute refuses bf16 tensors, naming the argument; the conversions refuse the wrong type.
  absl::Status refused = be.AddInPlace(narrow, &wide);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("x is a bf16 tensor"), std::string::npos) << refused;
  EXPECT_EQ(be.ToBf16(narrow, "twice").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(be.ToF32(wide, "f32").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Bf16Test, CpuBf16GemmRoundsInputsAndAccumulatesInF32) {
  CpuBackend f32;
  CpuBackend bf16({.bf16_gemm = true});
  // a = [1 + 2^-9, 1], b = [1, 1]^T: bf16 drops a's 2^-9, f32 keeps it.
  const std::vector<float> av = {1.0f + 1.0f / 512, 1.0f}, bv = {1.0f, 1.0f};
  for (CpuBackend* be : {&f32, &bf16}) {
    Tensor a = *be->FromHost({1, 2}, av, "a");
    Tensor b = *be->FromHost({2, 1}, bv, "b");
    Tensor c = *be->Zeros({1, 1}, "c");
    ASSERT_TRUE(be->Gemm(a, false, b, false, 1, 0, &c).ok());
    EXPECT_EQ((*be->ToVector(c))[0], be == &bf16 ? 2.0f : 2.0f + 1.0f / 512);
    // The bf16 copies are scratch, returned after the op.
    EXPECT_EQ(be->device_allocator().scratch_bytes(), 0);
  }
  // Accumulation stays f32: 256 products of 1 * (1 + 2^-7) sum to 258 exactly (bf16 sums could
  // not hold 258 = 1.0078125 * 256: it needs 9 mantissa bits).
  std::vector<float> ones(256, 1.0f), near(256, 1.0f + 1.0f / 128);
  Tensor a = *bf16.FromHost({1, 256}, ones, "a");
  Tensor b = *bf16.FromHost({256, 1}, near, "b");
  Tensor c = *bf16.Zeros({1, 1}, "c");
  ASSERT_TRUE(bf16.Gemm(a, false, b, false, 1, 0, &c).ok());
  EXPECT_EQ((*bf16.ToVector(c))[0], 258.0f);
}

}  // namespace
}  // namespace pipetrain::kernels
