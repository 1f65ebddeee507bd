// The AVX-512 table's elementwise functions against the AVX2 table's, bit for bit (the promise in
// kernels/cpu/vector_kernels_avx512.cc that picking the wider table changes no number), on every
// length from 1 to 70 (full vectors and every tail) and on inputs that reach exp's clamps, NaN
// and infinities. Skipped, saying so, on a CPU without AVX-512F.
#include "kernels/cpu/vector_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "tests/kernels/reference_ops.h"

namespace pipetrain::kernels {
namespace {

class Avx512VectorKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    wide_ = Avx512VectorKernels();
    narrow_ = Avx2VectorKernels();
    if (wide_ == nullptr) GTEST_SKIP() << "this CPU has no AVX-512F: the table is never used here";
    ASSERT_NE(narrow_, nullptr);
  }
  // Values in [-scale, scale], with the specials at fixed positions where n allows.
  static std::vector<float> Input(int64_t n, uint32_t seed, float scale) {
    std::vector<float> v = testing::RandomNonZero(n, seed, scale);
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), 100.0f, -100.0f, 0.0f};
    for (size_t i = 0; i < 6 && 5 * i + 3 < v.size(); ++i) v[5 * i + 3] = specials[i];
    return v;
  }
  static bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }

  const VectorKernels* wide_ = nullptr;
  const VectorKernels* narrow_ = nullptr;
};

TEST_F(Avx512VectorKernelsTest, TakesTheReductionsFromTheAvx2Table) {
  EXPECT_STREQ(wide_->name, "avx512");
  EXPECT_EQ(wide_->layer_norm_forward, narrow_->layer_norm_forward);
  EXPECT_EQ(wide_->layer_norm_backward_input, narrow_->layer_norm_backward_input);
  EXPECT_EQ(wide_->layer_norm_backward_weight, narrow_->layer_norm_backward_weight);
  EXPECT_EQ(wide_->row_max, narrow_->row_max);
  EXPECT_EQ(wide_->exp_shift_sum, narrow_->exp_shift_sum);
  EXPECT_EQ(wide_->dot, narrow_->dot);
  EXPECT_NE(wide_->gelu_forward, narrow_->gelu_forward);
}

TEST_F(Avx512VectorKernelsTest, ElementwiseFunctionsGiveTheAvx2Bits) {
  for (int64_t n = 1; n <= 70; ++n) {
    SCOPED_TRACE(n);
    const std::vector<float> x = Input(n, 1 + n, 6.0f), dy = Input(n, 100 + n, 2.0f);
    std::vector<float> a(n), b(n);
    wide_->gelu_forward(x.data(), n, a.data());
    narrow_->gelu_forward(x.data(), n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "gelu_forward";
    wide_->gelu_backward(dy.data(), x.data(), n, a.data());
    narrow_->gelu_backward(dy.data(), x.data(), n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "gelu_backward";
    wide_->add(x.data(), dy.data(), n, a.data());
    narrow_->add(x.data(), dy.data(), n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "add";
    a = x;
    b = x;
    wide_->scale(0.37f, n, a.data());
    narrow_->scale(0.37f, n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "scale";
    a = dy;
    b = dy;
    wide_->softmax_backward_row(x.data(), 0.25f, 0.125f, n, a.data());
    narrow_->softmax_backward_row(x.data(), 0.25f, 0.125f, n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "softmax_backward_row";
    // Three rows of n: the bias added to each, and the column sums of dy accumulated.
    const std::vector<float> rows = Input(3 * n, 200 + n, 3.0f);
    a = rows;
    b = rows;
    wide_->add_bias(x.data(), 3, n, a.data());
    narrow_->add_bias(x.data(), 3, n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "add_bias";
    a = dy;
    b = dy;
    wide_->bias_grad(rows.data(), 3, n, a.data());
    narrow_->bias_grad(rows.data(), 3, n, b.data());
    EXPECT_TRUE(SameBits(a, b)) << "bias_grad";
    // AdamW on finite values (grad, param, m, v >= 0), two steps.
    const std::vector<float> g = testing::RandomNonZero(n, 300 + n, 1.0f);
    std::vector<float> pa = testing::RandomNonZero(n, 400 + n, 1.0f), pb = pa;
    std::vector<float> ma(n, 0.01f), mb = ma, va(n, 0.02f), vb = va;
    for (int step = 1; step <= 2; ++step) {
      const float bc1 = step == 1 ? 0.1f : 0.19f, bc2 = step == 1 ? 0.001f : 0.001999f;
      wide_->adamw(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, bc1, bc2, g.data(), n, pa.data(), ma.data(),
                   va.data());
      narrow_->adamw(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, bc1, bc2, g.data(), n, pb.data(),
                     mb.data(), vb.data());
    }
    EXPECT_TRUE(SameBits(pa, pb) && SameBits(ma, mb) && SameBits(va, vb)) << "adamw";
  }
}

}  // namespace
}  // namespace pipetrain::kernels
