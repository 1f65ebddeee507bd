// kernels/cpu/gemm_router.h and gemm_choice.h: which library runs each GEMM shape, and both
// libraries against a float64 product (every transpose, beta 0 and 1, leading dimensions wider
// than the rows, as attention passes them). Tolerance: |got - want| <= 1e-4 + 1e-4 |want| (fp32 accumulation of k <= 100
// products of values in [-1, 1]). Bitwise: one library gives the same bits on every call and on
// every thread, which the schedules' bitwise equivalence rests on.
#include "kernels/cpu/gemm_router.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <thread>
#include <vector>

#include "tests/kernels/reference_ops.h"

namespace pipetrain::kernels {
namespace {

using testing::RandomNonZero;
using testing::VecD;

TEST(ChooseGemmLibraryTest, OneDnnForLinearLayersOpenBlasForNarrowAndTallWeightGradients) {
  // The peer model at hidden 256 (1024 tokens per microbatch, ffn 1024, head dim 32).
  EXPECT_EQ(ChooseGemmLibrary({false, false, 1024, 768, 256, false}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({false, true, 1024, 256, 1024, false}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({true, false, 256, 1024, 1024, true}), GemmLibrary::kOneDnn);
  // dW += X^T dY of the MLP's down projection: m = 4n.
  EXPECT_EQ(ChooseGemmLibrary({true, false, 1024, 256, 1024, true}), GemmLibrary::kOpenBlas);
  // Attention: the scores (n = keys) on oneDNN; P V and the key/value gradients (n = head dim)
  // on OpenBLAS.
  EXPECT_EQ(ChooseGemmLibrary({false, true, 32, 128, 32, false}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({false, false, 32, 32, 128, false}), GemmLibrary::kOpenBlas);
  EXPECT_EQ(ChooseGemmLibrary({true, false, 32, 32, 96, false}), GemmLibrary::kOpenBlas);
  // The boundaries.
  EXPECT_EQ(ChooseGemmLibrary({false, false, 8, 63, 8, false}), GemmLibrary::kOpenBlas);
  EXPECT_EQ(ChooseGemmLibrary({false, false, 8, 64, 8, false}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({true, false, 256, 64, 1024, true}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({true, false, 1023, 64, 8, true}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({true, false, 1024, 257, 8, true}), GemmLibrary::kOneDnn);
  EXPECT_EQ(ChooseGemmLibrary({true, false, 1024, 256, 8, true}), GemmLibrary::kOpenBlas);
  EXPECT_EQ(ChooseGemmLibrary({false, false, 1024, 256, 8, true}), GemmLibrary::kOneDnn);
}

// With OpenBLAS held to narrower kernels than the core has, oneDNN runs every shape.
TEST(ChooseGemmLibraryTest, NarrowOpenBlasKernelsSendEveryShapeToOneDnn) {
  for (const GemmShape& shape :
       {GemmShape{true, false, 1024, 256, 1024, true}, GemmShape{false, false, 32, 32, 128, false},
        GemmShape{true, false, 32, 32, 96, false},
        GemmShape{false, false, 1024, 768, 256, false}}) {
    EXPECT_EQ(ChooseGemmLibrary(shape, /*openblas_narrower=*/true), GemmLibrary::kOneDnn);
  }
  EXPECT_EQ(ChooseGemmLibrary({true, false, 1024, 256, 1024, true}, false), GemmLibrary::kOpenBlas);
}

// A stored [rows, ld] (ld >= cols) with random values in the first `cols` columns.
struct Strided {
  int64_t rows, cols, ld;
  std::vector<float> values;
  Strided(int64_t r, int64_t c, int64_t l, uint32_t seed)
      : rows(r), cols(c), ld(l), values(RandomNonZero(r * l, seed)) {}
  VecD Dense() const {
    VecD d;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) d.push_back(values[i * ld + j]);
    return d;
  }
};

struct Case {
  bool ta, tb;
  float beta;
  std::vector<float> got;
  VecD want;
};

// C[m, n] (row stride n + 3) = 0.5 op(A) op(B) + beta C through `router`, and the float64 value.
Case RunGemm(const GemmRouter& router, bool ta, bool tb, float beta, int64_t m, int64_t n,
            int64_t k) {
  const Strided a(ta ? k : m, ta ? m : k, (ta ? m : k) + 5, 1);
  const Strided b(tb ? n : k, tb ? k : n, (tb ? k : n) + 7, 2);
  const int64_t ldc = n + 3;
  Case c{ta, tb, beta, RandomNonZero(m * ldc, 3), {}};
  const std::vector<float> c0 = c.got;
  router.Run(ta, tb, m, n, k, 0.5f, a.values.data(), a.ld, b.values.data(), b.ld, beta,
             c.got.data(), ldc);
  const VecD product = testing::RefGemm(a.Dense(), a.rows, a.cols, ta, b.Dense(), b.rows, b.cols,
                                        tb);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      c.want.push_back(0.5 * product[i * n + j] + beta * c0[i * ldc + j]);
    }
  // Only the first n columns of each row are C; drop the padding from `got`.
  std::vector<float> dense;
  for (int64_t i = 0; i < m; ++i)
    dense.insert(dense.end(), c.got.begin() + i * ldc, c.got.begin() + i * ldc + n);
  // The padding itself must be untouched.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n; j < ldc; ++j) EXPECT_EQ(c.got[i * ldc + j], c0[i * ldc + j]);
  c.got = dense;
  return c;
}

class SgemmTest : public ::testing::TestWithParam<GemmRouting> {};

INSTANTIATE_TEST_SUITE_P(Routing, SgemmTest,
                         ::testing::Values(GemmRouting::kPerShape, GemmRouting::kOpenBlasOnly,
                                           GemmRouting::kOneDnnOnly),
                         [](const ::testing::TestParamInfo<GemmRouting>& info) {
                           switch (info.param) {
                             case GemmRouting::kPerShape:
                               return "PerShape";
                             case GemmRouting::kOpenBlasOnly:
                               return "OpenBlas";
                             case GemmRouting::kOneDnnOnly:
                               return "OneDnn";
                           }
                           return "Unknown";
                         });

TEST_P(SgemmTest, MatchesFloat64ForEveryTransposeAndBeta) {
  const GemmRouter router{GetParam(), 1};
  // n = 96 and n = 9 send the per-shape routing to oneDNN and to OpenBLAS; m and k are not
  // multiples of any vector width.
  for (int64_t n : {96, 9}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.0f, 1.0f}) {
          const Case c = RunGemm(router, ta, tb, beta, 37, n, 83);
          ASSERT_EQ(c.got.size(), c.want.size());
          int bad = 0;
          for (size_t i = 0; i < c.got.size(); ++i) {
            if (std::abs(c.got[i] - c.want[i]) > 1e-4 + 1e-4 * std::abs(c.want[i]) && ++bad < 4) {
              ADD_FAILURE() << "n " << n << " ta " << ta << " tb " << tb << " beta " << beta
                            << " [" << i << "]: got " << c.got[i] << " want " << c.want[i];
            }
          }
        }
      }
    }
  }
}

TEST_P(SgemmTest, SameBitsOnEveryCallAndEveryThread) {
  const GemmRouter router{GetParam(), 1};
  const Case first = RunGemm(router, true, false, 1.0f, 200, 96, 300);
  EXPECT_EQ(RunGemm(router, true, false, 1.0f, 200, 96, 300).got, first.got);
  // Two threads at once (as a process's pipeline ranks run), each with its own thread count.
  std::vector<float> on_thread[2];
  std::thread t0([&] { on_thread[0] = RunGemm(router, true, false, 1.0f, 200, 96, 300).got; });
  std::thread t1([&] { on_thread[1] = RunGemm(router, true, false, 1.0f, 200, 96, 300).got; });
  t0.join();
  t1.join();
  EXPECT_EQ(on_thread[0], first.got);
  EXPECT_EQ(on_thread[1], first.got);
}

// oneDNN threads with the OpenMP runtime it loaded; the router sets that runtime's count on the
// calling thread, so a backend asked for one thread gets one on every compute thread (a fresh
// thread starts at the runtime's default, the machine's core count).
TEST(GemmRouterTest, OneDnnRunsWithTheBackendsThreadCountOnEachThread) {
  using GetMaxThreads = int (*)();
  const auto get_max_threads =
      reinterpret_cast<GetMaxThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  ASSERT_NE(get_max_threads, nullptr) << "oneDNN's OpenMP runtime is not loaded";
  for (int threads : {1, 2}) {
    int seen = 0;
    std::thread t([&] {
      RunGemm({GemmRouting::kOneDnnOnly, threads}, false, false, 0.0f, 8, 96, 8);
      seen = get_max_threads();
    });
    t.join();
    EXPECT_EQ(seen, threads);
  }
}

}  // namespace
}  // namespace pipetrain::kernels
