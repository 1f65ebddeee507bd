// Every CpuBackend op against a float64 reference on random non-zero inputs, once with each
// VectorKernels table (AVX2/FMA where the CPU has it, and the portable loops). The AVX2 table
// (its own exp, FMA contraction, 8-lane reductions) differs from the portable one in the last
// bits; both meet the same tolerances, which issue 26 left unchanged.
// Tolerances: |got - want| <= atol + rtol * |want| with rtol = 1e-4 and atol = 1e-5 for
// elementwise ops, atol = 1e-4 for GEMM-based ops (fp32 accumulation over k <= 64 terms).
// Backward references of attention and layernorm are central finite differences of the float64
// forward (h = 1e-6), so they check the math independently of the kernels' formulas.
#include "kernels/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>

#include "glog/logging.h"
#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/openblas_kernels.h"
#include "tests/kernels/reference_ops.h"

namespace pipetrain::kernels {
namespace {

using testing::RandomNonZero;
using testing::ToDouble;
using testing::VecD;

void ExpectNear(const std::vector<float>& got, const VecD& want, double atol, double rtol,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > atol + rtol * std::abs(want[i])) {
      if (++bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// The parameter: use the portable kernels.
class CpuBackendTest : public ::testing::TestWithParam<bool> {
 public:
  CpuBackend& backend() { return backend_; }
  Tensor RandomTensor(const Shape& shape, uint32_t seed, float scale) {
    return Random(shape, seed, scale);
  }

 protected:
  Tensor Make(const Shape& shape, const std::vector<float>& values) {
    auto t = backend_.FromHost(shape, values, "test");
    CHECK(t.ok()) << t.status();
    return *std::move(t);
  }
  Tensor Random(const Shape& shape, uint32_t seed, float scale = 1.0f) {
    return Make(shape, RandomNonZero(NumElements(shape), seed, scale));
  }
  Tensor Empty(const Shape& shape) { return *backend_.Empty(shape, "test"); }
  std::vector<float> Get(const Tensor& t) { return *backend_.ToVector(t); }
  VecD GetD(const Tensor& t) { return ToDouble(Get(t)); }

  CpuBackend backend_{{.portable_kernels = GetParam()}};
};

INSTANTIATE_TEST_SUITE_P(VectorKernels, CpuBackendTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Portable" : "Best";
                         });

// OpenBLAS never runs its pre-AVX2 kernels on a CPU with AVX2 and FMA (unless the user chose a
// kernel set with OPENBLAS_CORETYPE).
TEST_P(CpuBackendTest, OpenBlasUsesAvx2KernelsWhereTheCpuHasThem) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice of kernels is kept";
  }
  if (!CpuHasAvx2Fma()) GTEST_SKIP() << "this CPU has no AVX2/FMA: no correction applies";
  EXPECT_EQ(OpenBlasCoreCorrection(backend_.blas_core(), true, false, false), "")
      << backend_.blas_core();
}

TEST(OpenBlasCoreCorrectionTest, UpgradesOnlyPreAvx2KernelSets) {
  EXPECT_EQ(OpenBlasCoreCorrection("Prescott", true, true, false), "SkylakeX");
  EXPECT_EQ(OpenBlasCoreCorrection("Prescott", true, false, false), "Haswell");
  EXPECT_EQ(OpenBlasCoreCorrection("Sandybridge", true, false, false), "Haswell");
  EXPECT_EQ(OpenBlasCoreCorrection("Zen", true, false, false), "");
  EXPECT_EQ(OpenBlasCoreCorrection("Haswell", true, true, false), "");
  EXPECT_EQ(OpenBlasCoreCorrection("Prescott", false, false, false), "");  // no AVX2: keep
  EXPECT_EQ(OpenBlasCoreCorrection("Prescott", true, true, true), "");     // user's choice
}

TEST(OpenBlasCoreUsesAvx512Test, NamesTheAvx512KernelSets) {
  for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_TRUE(OpenBlasCoreUsesAvx512(core)) << core;
  }
  for (const char* core : {"Haswell", "Zen", "Prescott", ""}) {
    EXPECT_FALSE(OpenBlasCoreUsesAvx512(core)) << core;
  }
}

// The backend routes GEMMs by shape, unless OpenBLAS runs narrower kernels than the core has
// (OPENBLAS_CORETYPE=Haswell on an AVX-512 core, as on the 2-core AMD EPYC these tests run on):
// then oneDNN runs every shape (gemm_choice.h). Checked on the shape the rule routes to OpenBLAS
// otherwise, the MLP down projection's weight gradient at hidden 256 (k = 1024 tokens: there the
// two libraries differ in the last bits, with AVX2 or AVX-512 kernels alike), against each
// library alone, bit for bit.
TEST_P(CpuBackendTest, TallWeightGradientRunsOnTheLibraryTheKernelSetCalls) {
  const bool narrower = CpuHasAvx512() && !OpenBlasCoreUsesAvx512(backend_.blas_core());
  const int64_t m = 1024, n = 256, k = 1024;
  ASSERT_EQ(ChooseGemmLibrary({true, false, m, n, k, true}), GemmLibrary::kOpenBlas);
  Tensor a = Random({k, m}, 1);
  Tensor b = Random({k, n}, 2);
  Tensor c = Random({m, n}, 3);
  std::vector<float> want(c.data(), c.data() + m * n);
  GemmRouter{narrower ? GemmRouting::kOneDnnOnly : GemmRouting::kOpenBlasOnly}.Run(
      true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 1.0f, want.data(), n);
  std::vector<float> other(c.data(), c.data() + m * n);
  GemmRouter{narrower ? GemmRouting::kOpenBlasOnly : GemmRouting::kOneDnnOnly}.Run(
      true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 1.0f, other.data(), n);
  ASSERT_TRUE(backend_.Gemm(a, true, b, false, 1.0f, 1.0f, &c).ok());
  const std::vector<float> got(c.data(), c.data() + m * n);
  EXPECT_EQ(got, want) << "core " << backend_.blas_core() << ", narrower " << narrower;
  if (got == other) {  // (they differed on every machine this ran on, AVX2 and AVX-512 kernels)
    GTEST_SKIP() << "OpenBLAS and oneDNN agree bit for bit on this machine: the library that ran "
                    "cannot be told apart";
  }
}

TEST_P(CpuBackendTest, BestKernelsAreTheWidestTheCpuRuns) {
  EXPECT_EQ(backend_.vector_kernels_name(), GetParam()                        ? "portable"
                                            : Avx512VectorKernels() != nullptr ? "avx512"
                                            : Avx2VectorKernels() != nullptr   ? "avx2-fma"
                                                                               : "portable");
}

TEST_P(CpuBackendTest, GemmAllTransposesAndAccumulate) {
  const int64_t m = 7, k = 13, n = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = Random(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = Random(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor c = Random({m, n}, 3);
      const VecD c0 = GetD(c);
      ASSERT_TRUE(backend_.Gemm(a, ta, b, tb, 0.5f, 1.0f, &c).ok());
      VecD want =
          testing::RefGemm(GetD(a), a.dim(0), a.dim(1), ta, GetD(b), b.dim(0), b.dim(1), tb);
      for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * want[i] + c0[i];
      ExpectNear(Get(c), want, 1e-4, 1e-4, "gemm accumulate");
      ASSERT_TRUE(backend_.Gemm(a, ta, b, tb, 1.0f, 0.0f, &c).ok());
      ExpectNear(Get(c),
                 testing::RefGemm(GetD(a), a.dim(0), a.dim(1), ta, GetD(b), b.dim(0), b.dim(1), tb),
                 1e-4, 1e-4, "gemm");
    }
  }
  Tensor a = Random({3, 4}, 1), b = Random({5, 2}, 2), c = Empty({3, 2});
  EXPECT_EQ(backend_.Gemm(a, false, b, false, 1, 0, &c).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(CpuBackendTest, GemmFlattensLeadingDims) {
  Tensor a = Random({2, 3, 4}, 5), b = Random({4, 6}, 6), c = Empty({2, 3, 6});
  ASSERT_TRUE(backend_.Gemm(a, false, b, false, 1, 0, &c).ok());
  ExpectNear(Get(c), testing::RefGemm(GetD(a), 6, 4, false, GetD(b), 4, 6, false), 1e-4, 1e-4,
             "gemm3d");
}

TEST_P(CpuBackendTest, AddBiasBiasGradAddFill) {
  Tensor y = Random({6, 5}, 7), bias = Random({5}, 8);
  const VecD y0 = GetD(y), b0 = GetD(bias);
  ASSERT_TRUE(backend_.AddBias(bias, &y).ok());
  VecD want(y0);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 5; ++j) want[r * 5 + j] += b0[j];
  ExpectNear(Get(y), want, 1e-5, 1e-4, "addbias");

  Tensor db = Random({5}, 9);
  const VecD db0 = GetD(db);
  ASSERT_TRUE(backend_.BiasGrad(y, /*accumulate=*/true, &db).ok());
  VecD wdb(db0);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 5; ++j) wdb[j] += want[r * 5 + j];
  ExpectNear(Get(db), wdb, 1e-5, 1e-4, "biasgrad acc");
  ASSERT_TRUE(backend_.BiasGrad(y, false, &db).ok());
  for (int j = 0; j < 5; ++j) wdb[j] -= db0[j];
  ExpectNear(Get(db), wdb, 1e-5, 1e-4, "biasgrad");

  Tensor a = Random({4, 3}, 10), b = Random({4, 3}, 11), out = Empty({4, 3});
  ASSERT_TRUE(backend_.Add(a, b, &out).ok());
  VecD wadd = GetD(a);
  const VecD bd = GetD(b);
  for (size_t i = 0; i < wadd.size(); ++i) wadd[i] += bd[i];
  ExpectNear(Get(out), wadd, 1e-6, 1e-6, "add");
  ASSERT_TRUE(backend_.AddInPlace(b, &a).ok());
  ExpectNear(Get(a), wadd, 1e-6, 1e-6, "addinplace");
  ASSERT_TRUE(backend_.Fill(2.5f, &a).ok());
  ExpectNear(Get(a), VecD(12, 2.5), 0, 0, "fill");
}

// BiasRows is exact (one float addition per element, the same in both tables); Linear is
// BiasRows then a beta = 1 Gemm, held to the float64 product at the Gemm's tolerance.
TEST_P(CpuBackendTest, BiasRowsAndLinear) {
  const int64_t rows = 6, k = 11, cols = 13;  // 13: a vector body and a masked tail
  Tensor bias = Random({cols}, 12), residual = Random({rows, cols}, 13), out = Empty({rows, cols});
  const std::vector<float> b = Get(bias), r = Get(residual);
  ASSERT_TRUE(backend_.BiasRows(bias, nullptr, &out).ok());
  std::vector<float> want(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) want[i * cols + j] = b[j];
  EXPECT_EQ(Get(out), want);
  ASSERT_TRUE(backend_.BiasRows(bias, &residual, &out).ok());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) want[i * cols + j] = r[i * cols + j] + b[j];
  EXPECT_EQ(Get(out), want);

  Tensor x = Random({rows, k}, 14), w = Random({k, cols}, 15);
  const VecD product = testing::RefGemm(GetD(x), rows, k, false, GetD(w), k, cols, false);
  ASSERT_TRUE(backend_.Linear(x, w, bias, &residual, &out).ok());
  VecD want_d(product);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) want_d[i * cols + j] += double(r[i * cols + j]) + b[j];
  ExpectNear(Get(out), want_d, 1e-4, 1e-4, "linear with residual");
  ASSERT_TRUE(backend_.Linear(x, w, bias, nullptr, &out).ok());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) want_d[i * cols + j] = product[i * cols + j] + b[j];
  ExpectNear(Get(out), want_d, 1e-4, 1e-4, "linear");
}

TEST_P(CpuBackendTest, Embedding) {
  const int64_t V = 11, H = 6, T = 4, B = 3;
  std::vector<int32_t> ids(B * T);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % V);
  Tensor wte = Random({V, H}, 12), wpe = Random({T, H}, 13), out = Empty({B * T, H});
  ASSERT_TRUE(backend_.EmbeddingForward(ids, T, wte, wpe, &out).ok());
  const VecD te = GetD(wte), pe = GetD(wpe);
  VecD want(B * T * H);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < H; ++j) want[i * H + j] = te[ids[i] * H + j] + pe[(i % T) * H + j];
  ExpectNear(Get(out), want, 1e-6, 1e-6, "embedding");

  Tensor dout = Random({B * T, H}, 14), dwte = Random({V, H}, 15), dwpe = Random({T, H}, 16);
  VecD wte_g = GetD(dwte), wpe_g = GetD(dwpe);
  const VecD d = GetD(dout);
  ASSERT_TRUE(backend_.EmbeddingBackward(ids, T, dout, true, &dwte, &dwpe).ok());
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < H; ++j) {
      wte_g[ids[i] * H + j] += d[i * H + j];
      wpe_g[(i % T) * H + j] += d[i * H + j];
    }
  ExpectNear(Get(dwte), wte_g, 1e-5, 1e-4, "dwte");
  ExpectNear(Get(dwpe), wpe_g, 1e-5, 1e-4, "dwpe");
  ids[2] = static_cast<int32_t>(V);
  EXPECT_EQ(backend_.EmbeddingForward(ids, T, wte, wpe, &out).code(),
            absl::StatusCode::kInvalidArgument);
}

// LayerNorm over rows of H against float64 (H % 8 != 0 exercises the vector kernels' tails).
void CheckLayerNorm(CpuBackendTest* test, int64_t R, int64_t H) {
  auto& backend_ = test->backend();
  auto Random = [&](const Shape& s, uint32_t seed, float scale = 1.0f) {
    return test->RandomTensor(s, seed, scale);
  };
  auto Empty = [&](const Shape& s) { return *backend_.Empty(s, "test"); };
  auto Get = [&](const Tensor& t) { return *backend_.ToVector(t); };
  auto GetD = [&](const Tensor& t) { return ToDouble(Get(t)); };
  Tensor x = Random({R, H}, 20, 2.0f), g = Random({H}, 21), b = Random({H}, 22);
  Tensor y = Empty({R, H}), mean = Empty({R}), rstd = Empty({R});
  ASSERT_TRUE(backend_.LayerNormForward(x, g, b, &y, &mean, &rstd).ok());
  VecD wm, wr;
  const VecD xd = GetD(x), gd = GetD(g), bd = GetD(b);
  ExpectNear(Get(y), testing::RefLayerNorm(xd, gd, bd, R, H, &wm, &wr), 1e-5, 1e-4, "ln y");
  ExpectNear(Get(mean), wm, 1e-5, 1e-4, "ln mean");
  ExpectNear(Get(rstd), wr, 1e-5, 1e-4, "ln rstd");

  // Backward against finite differences of L = <y, dy> in float64.
  Tensor dy = Random({R, H}, 23);
  const VecD dyd = GetD(dy);
  auto loss = [&](const VecD& xv, const VecD& gv, const VecD& bv) {
    VecD m, r;
    const VecD yv = testing::RefLayerNorm(xv, gv, bv, R, H, &m, &r);
    double s = 0;
    for (size_t i = 0; i < yv.size(); ++i) s += yv[i] * dyd[i];
    return s;
  };
  auto fd = [&](VecD* v, size_t i, const std::function<double()>& f) {
    const double h = 1e-6, old = (*v)[i];
    (*v)[i] = old + h;
    const double lp = f();
    (*v)[i] = old - h;
    const double lm = f();
    (*v)[i] = old;
    return (lp - lm) / (2 * h);
  };
  VecD xv = xd, gv = gd, bv = bd;
  auto f = [&] { return loss(xv, gv, bv); };
  VecD want_dx(R * H), want_dg(H), want_db(H);
  for (size_t i = 0; i < xv.size(); ++i) want_dx[i] = fd(&xv, i, f);
  for (size_t i = 0; i < gv.size(); ++i) want_dg[i] = fd(&gv, i, f);
  for (size_t i = 0; i < bv.size(); ++i) want_db[i] = fd(&bv, i, f);
  Tensor dx = Empty({R, H}), dg = Random({H}, 24), db = Random({H}, 25);
  ASSERT_TRUE(backend_.LayerNormBackwardInput(dy, x, g, mean, rstd, &dx).ok());
  ExpectNear(Get(dx), want_dx, 1e-4, 1e-3, "ln dx");
  // With a residual gradient added in the same pass.
  Tensor residual = Random({R, H}, 26), dx_plus = Empty({R, H});
  ASSERT_TRUE(backend_.LayerNormBackwardInput(dy, x, g, mean, rstd, &dx_plus, &residual).ok());
  VecD want_plus = want_dx;
  const VecD rd = GetD(residual);
  for (size_t i = 0; i < want_plus.size(); ++i) want_plus[i] += rd[i];
  ExpectNear(Get(dx_plus), want_plus, 1e-4, 1e-3, "ln dx + residual");
  ASSERT_TRUE(backend_.LayerNormBackwardWeight(dy, x, mean, rstd, false, &dg, &db).ok());
  ExpectNear(Get(dg), want_dg, 1e-4, 1e-3, "ln dgamma");
  ExpectNear(Get(db), want_db, 1e-4, 1e-3, "ln dbeta");
  ASSERT_TRUE(backend_.LayerNormBackwardWeight(dy, x, mean, rstd, true, &dg, &db).ok());
  for (auto& v : want_dg) v *= 2;
  ExpectNear(Get(dg), want_dg, 2e-4, 1e-3, "ln dgamma accumulate");
}

TEST_P(CpuBackendTest, LayerNormForwardAndBackward) { CheckLayerNorm(this, 5, 16); }
TEST_P(CpuBackendTest, LayerNormRowsNotAMultipleOfEight) { CheckLayerNorm(this, 3, 13); }

TEST_P(CpuBackendTest, Gelu) {
  // 67 elements: the vector kernels' tail; |x| up to 40 reaches tanh's saturation.
  std::vector<float> xs = RandomNonZero(67, 30, 4.0f);
  xs[3] = 40.0f;
  xs[64] = -40.0f;
  xs[65] = 9.5f;
  Tensor x = Make({67}, xs), y = Empty({67}), dy = Random({67}, 31), dx = Empty({67});
  ASSERT_TRUE(backend_.GeluForward(x, &y).ok());
  ASSERT_TRUE(backend_.GeluBackward(dy, x, &dx).ok());
  const VecD xd = GetD(x), dyd = GetD(dy);
  VecD wy(67), wdx(67);
  for (int i = 0; i < 67; ++i) {
    wy[i] = testing::RefGelu(xd[i]);
    const double h = 1e-6;
    wdx[i] = dyd[i] * (testing::RefGelu(xd[i] + h) - testing::RefGelu(xd[i] - h)) / (2 * h);
  }
  ExpectNear(Get(y), wy, 1e-5, 1e-4, "gelu");
  ExpectNear(Get(dx), wdx, 1e-5, 1e-4, "gelu grad");
}

// Attention against float64 (finite differences for the backward, on every stride-th input).
void CheckAttention(CpuBackendTest* test, int64_t B, int64_t T, int64_t nh, int64_t H,
                    size_t stride) {
  auto& backend_ = test->backend();
  auto Random = [&](const Shape& s, uint32_t seed) { return test->RandomTensor(s, seed, 1.0f); };
  auto Empty = [&](const Shape& s) { return *backend_.Empty(s, "test"); };
  auto Get = [&](const Tensor& t) { return *backend_.ToVector(t); };
  auto GetD = [&](const Tensor& t) { return ToDouble(Get(t)); };
  Tensor qkv = Random({B * T, 3 * H}, 40), out = Empty({B * T, H});
  ASSERT_TRUE(backend_.AttentionForward(qkv, B, T, nh, &out).ok());
  VecD wp;
  const VecD qd = GetD(qkv);
  ExpectNear(Get(out), testing::RefAttention(qd, B, T, nh, H, &wp), 1e-5, 1e-4, "attn out");

  // The backward recomputes the probabilities from qkv alone.
  Tensor dout = Random({B * T, H}, 41), dqkv = Empty({B * T, 3 * H});
  ASSERT_TRUE(backend_.AttentionBackward(dout, qkv, B, T, nh, &dqkv).ok());
  const VecD dd = GetD(dout);
  VecD qv = qd, want(qd.size());
  std::vector<float> got = Get(dqkv), got_checked;
  VecD want_checked;
  for (size_t i = 0; i < qv.size(); i += stride) {
    const double h = 1e-6, old = qv[i];
    auto l = [&] {
      VecD p;
      const VecD o = testing::RefAttention(qv, B, T, nh, H, &p);
      double s = 0;
      for (size_t j = 0; j < o.size(); ++j) s += o[j] * dd[j];
      return s;
    };
    qv[i] = old + h;
    const double lp = l();
    qv[i] = old - h;
    const double lm = l();
    qv[i] = old;
    want[i] = (lp - lm) / (2 * h);
    got_checked.push_back(got[i]);
    want_checked.push_back(want[i]);
  }
  ExpectNear(got_checked, want_checked, 1e-4, 1e-3, "attn dqkv");
}

TEST_P(CpuBackendTest, CausalAttentionForwardAndBackward) { CheckAttention(this, 2, 5, 2, 8, 1); }
// T = 70: two full 32-row query blocks and a partial one, so the block-causal GEMMs and the
// lower-triangle-only dS scratch are exercised.
TEST_P(CpuBackendTest, CausalAttentionAcrossQueryBlocks) {
  CheckAttention(this, 1, 70, 2, 16, 7);
}

// A bf16 job's attention (the CUDA backend's tensor-core products): every product reads
// bf16-rounded inputs: q, k, v and the output gradient, P for P V and P^T dO, dS for dS K and
// dS^T Q; the softmax and its backward stay fp32.
TEST(CpuBf16AttentionTest, EveryProductReadsBf16Inputs) {
  const int64_t B = 1, T = 40, nh = 2, H = 16;
  CpuBackend fp32;
  CpuBackend bf16({.bf16_gemm = true});
  const std::vector<float> raw = RandomNonZero(B * T * 3 * H, 70, 1.0f);
  std::vector<float> rounded(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) rounded[i] = RoundToBf16(raw[i]);
  const std::vector<float> grad = RandomNonZero(B * T * H, 71, 1.0f);
  auto forward = [&](CpuBackend& be, const std::vector<float>& qkv) {
    Tensor in = *be.FromHost({B * T, 3 * H}, qkv, "qkv");
    Tensor out = *be.Zeros({B * T, H}, "out");
    EXPECT_TRUE(be.AttentionForward(in, B, T, nh, &out).ok());
    return *be.ToVector(out);
  };
  auto backward = [&](CpuBackend& be, const std::vector<float>& qkv,
                      const std::vector<float>& dout) {
    Tensor in = *be.FromHost({B * T, 3 * H}, qkv, "qkv");
    Tensor d = *be.FromHost({B * T, H}, dout, "dout");
    Tensor dqkv = *be.Zeros({B * T, 3 * H}, "dqkv");
    EXPECT_TRUE(be.AttentionBackward(d, in, B, T, nh, &dqkv).ok());
    return *be.ToVector(dqkv);
  };
  // q, k, v are rounded: the raw inputs give the bits of the pre-rounded ones.
  const std::vector<float> out = forward(bf16, raw);
  EXPECT_EQ(out, forward(bf16, rounded));
  // P is rounded before P V: the float64 attention of the rounded inputs with bf16 probabilities,
  // to fp32 accuracy; the fp32 backend, which multiplies unrounded P, is farther from it by
  // orders of magnitude.
  VecD probs;
  const VecD want = testing::RefAttention(ToDouble(rounded), B, T, nh, H, &probs,
                                             /*bf16_probs=*/true);
  ExpectNear(out, want, 2e-6, 1e-5, "bf16 attention out");
  const std::vector<float> fp32_out = forward(fp32, rounded);
  double far = 0;
  for (size_t i = 0; i < want.size(); ++i) far = std::max(far, std::abs(fp32_out[i] - want[i]));
  EXPECT_GT(far, 1e-4) << "the fp32 product is indistinguishable from the bf16 one";
  // The output gradient is rounded too; the backward stays within bf16 accuracy of fp32's.
  std::vector<float> grad_rounded(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) grad_rounded[i] = RoundToBf16(grad[i]);
  const std::vector<float> dqkv = backward(bf16, raw, grad);
  EXPECT_EQ(dqkv, backward(bf16, rounded, grad_rounded));
  const std::vector<float> fp32_dqkv = backward(fp32, rounded, grad_rounded);
  double worst = 0, differs = 0;
  for (size_t i = 0; i < dqkv.size(); ++i) {
    worst = std::max(worst, std::abs(dqkv[i] - fp32_dqkv[i]) / (0.05 + std::abs(fp32_dqkv[i])));
    differs = std::max(differs, static_cast<double>(std::abs(dqkv[i] - fp32_dqkv[i])));
  }
  EXPECT_LT(worst, 2e-2) << "bf16 attention gradients stray from fp32's";
  EXPECT_GT(differs, 1e-5) << "dS and P were not rounded in the backward";
}

TEST_P(CpuBackendTest, CrossEntropy) {
  const int64_t N = 6, V = 7;
  Tensor logits = Random({N, V}, 50, 3.0f), probs = Empty({N, V}), dl = Empty({N, V});
  const std::vector<int32_t> targets = {3, kIgnoreTarget, 0, 6, 2, 2};
  auto r = backend_.CrossEntropyForward(logits, targets, &probs);
  ASSERT_TRUE(r.ok()) << r.status();
  const VecD ld = GetD(logits);
  double loss = 0;
  VecD wp(N * V), wd(N * V, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    double mx = -1e300, s = 0;
    int arg = 0;
    for (int64_t j = 0; j < V; ++j)
      if (ld[i * V + j] > mx) mx = ld[i * V + j], arg = static_cast<int>(j);
    for (int64_t j = 0; j < V; ++j) s += std::exp(ld[i * V + j] - mx);
    for (int64_t j = 0; j < V; ++j) wp[i * V + j] = std::exp(ld[i * V + j] - mx) / s;
    EXPECT_EQ(r->predictions[i], arg);
    if (targets[i] == kIgnoreTarget) continue;
    loss += -std::log(wp[i * V + targets[i]]);
    for (int64_t j = 0; j < V; ++j) wd[i * V + j] = 0.25 * (wp[i * V + j] - (j == targets[i])) / 5;
  }
  EXPECT_EQ(r->valid_targets, 5);
  EXPECT_NEAR(r->loss, loss / 5, 1e-5);
  ExpectNear(Get(probs), wp, 1e-6, 1e-4, "ce probs");
  ASSERT_TRUE(backend_.CrossEntropyBackward(probs, targets, 0.25f, &dl).ok());
  ExpectNear(Get(dl), wd, 1e-6, 1e-4, "ce dlogits");
}

// The prediction is the first largest logit, ignoring NaN (0 when no logit is larger than -inf),
// on ties and on rows the vector maximum cannot take at face value: a NaN (anywhere in its
// lane), +inf, all -inf. Rows of 19 (two full vectors and a tail of 3).
TEST_P(CpuBackendTest, CrossEntropyPredictionsOnTiesAndNonFiniteRows) {
  const int64_t V = 19;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows(7, std::vector<float>(V, 0.5f));
  rows[0][4] = 2.0f;  // a tie at 4 and 17: the first wins
  rows[0][17] = 2.0f;
  rows[1][18] = 3.0f;  // the maximum in the tail
  rows[2][2] = nan;    // NaN before the maximum, in the maximum's lane
  rows[2][10] = 4.0f;
  rows[3][10] = 4.0f;  // NaN after it
  rows[3][18] = nan;
  rows[4][5] = inf;
  rows[4][9] = inf;
  for (float& x : rows[5]) x = -inf;
  for (float& x : rows[6]) x = nan;
  const std::vector<int32_t> want = {4, 18, 10, 10, 5, 0, 0};
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  Tensor logits = Make({7, V}, flat), probs = Empty({7, V});
  const std::vector<int32_t> targets(7, 1);
  auto r = backend_.CrossEntropyForward(logits, targets, &probs);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->predictions, want);
  EXPECT_TRUE(std::isnan(r->loss));  // rows 2..6 have no finite loss
}

TEST_P(CpuBackendTest, AdamW) {
  const int64_t n = 33;
  Tensor p = Random({n}, 60), g = Random({n}, 61), m = Random({n}, 62, 0.1f),
         v = Make({n}, std::vector<float>(n, 0.02f));
  const AdamWConfig cfg{
      .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.1f};
  VecD pd = GetD(p), gd = GetD(g), md = GetD(m), vd = GetD(v);
  ASSERT_TRUE(backend_.AdamWUpdate(cfg, 3, g, &p, &m, &v).ok());
  for (int64_t i = 0; i < n; ++i) {
    md[i] = 0.9 * md[i] + 0.1 * gd[i];
    vd[i] = 0.99 * vd[i] + 0.01 * gd[i] * gd[i];
    const double mh = md[i] / (1 - std::pow(0.9, 3)), vh = vd[i] / (1 - std::pow(0.99, 3));
    pd[i] -= 0.01 * (mh / (std::sqrt(vh) + 1e-6) + 0.1 * pd[i]);
  }
  ExpectNear(Get(p), pd, 1e-6, 1e-5, "adamw p");
  ExpectNear(Get(m), md, 1e-7, 1e-5, "adamw m");
  ExpectNear(Get(v), vd, 1e-7, 1e-5, "adamw v");
}

TEST_P(CpuBackendTest, AllFiniteSeesOneNanOrInfInAnyTensor) {
  Tensor a = Random({7, 5}, 63), b = Random({33}, 64);
  absl::StatusOr<bool> finite = backend_.AllFinite({&a, &b});
  ASSERT_TRUE(finite.ok()) << finite.status();
  EXPECT_TRUE(*finite);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (int64_t at : {int64_t{0}, int64_t{17}, int64_t{32}}) {
      std::vector<float> v = Get(b);
      v[at] = bad;
      Tensor poisoned = Make({33}, v);
      finite = backend_.AllFinite({&a, &poisoned});
      ASSERT_TRUE(finite.ok()) << finite.status();
      EXPECT_FALSE(*finite) << bad << " at " << at;
    }
  }
  // The largest finite values are finite.
  Tensor big = Make({2}, {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()});
  EXPECT_TRUE(*backend_.AllFinite({&big}));
  EXPECT_TRUE(*backend_.AllFinite({}));
}

TEST_P(CpuBackendTest, SumOfSquaresAddsInElementOrderInDouble) {
  Tensor t = Make({4}, {3.0f, 4.0f, -1.0f, 0.5f});
  absl::StatusOr<double> sum = backend_.SumOfSquares(t);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, 26.25);
  // Element order, in double: the squares of float max do not overflow, and a tiny square
  // after a big one is lost exactly as the sequential sum loses it.
  const float big = std::numeric_limits<float>::max();
  Tensor huge = Make({2}, {big, big});
  EXPECT_EQ(*backend_.SumOfSquares(huge), 2.0 * static_cast<double>(big) * big);
  Tensor r = Random({7, 13}, 65);
  double want = 0;
  for (float x : Get(r)) want += static_cast<double>(x) * x;
  EXPECT_EQ(*backend_.SumOfSquares(r), want);
  EXPECT_EQ(HostSumOfSquares(Get(r)), want);
  Tensor nan = Make({2}, {1.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_TRUE(std::isnan(*backend_.SumOfSquares(nan)));
}

TEST(SumOfSquaresLanesTest, OneLaneBelow8192ThenPowersOfTwoUpTo65536) {
  EXPECT_EQ(SumOfSquaresLanes(0), 1);
  EXPECT_EQ(SumOfSquaresLanes(8191), 1);
  EXPECT_EQ(SumOfSquaresLanes(8192), 2);
  EXPECT_EQ(SumOfSquaresLanes(3 * 4096 - 1), 2);
  EXPECT_EQ(SumOfSquaresLanes(4 * 4096), 4);
  EXPECT_EQ(SumOfSquaresLanes(int64_t{1} << 28), int64_t{1} << 16);
  EXPECT_EQ(SumOfSquaresLanes(int64_t{1} << 40), int64_t{1} << 16);
}

TEST_P(CpuBackendTest, SumOfSquaresOfALargeTensorAddsItsLanesInLaneOrder) {
  // 5 * 4096 + 3 elements: 4 lanes; lane j holds elements j, j + 4, ..., each in element order.
  const int64_t n = 5 * 4096 + 3;
  Tensor r = Random({n}, 66);
  const std::vector<float> x = Get(r);
  double lane[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) lane[i % 4] += static_cast<double>(x[i]) * x[i];
  const double want = ((lane[0] + lane[1]) + lane[2]) + lane[3];
  EXPECT_EQ(*backend_.SumOfSquares(r), want);
  EXPECT_EQ(HostSumOfSquares(x), want);
  // The order is observable: after 1e16 (ulp 2) each 1 alone rounds away (a tie, to even), but
  // four 1s in lane 1 add up to 4 before meeting it.
  std::vector<float> big_then_ones(static_cast<size_t>(n), 0.0f);
  big_then_ones[0] = 1e8f;
  for (int i : {1, 5, 9, 13}) big_then_ones[i] = 1.0f;
  EXPECT_EQ(HostSumOfSquares(big_then_ones), 1e16 + 4.0);
  double element_order = 0;
  for (float v : big_then_ones) element_order += static_cast<double>(v) * v;
  EXPECT_EQ(element_order, 1e16);
}

TEST_P(CpuBackendTest, ScaleMultipliesEveryElementInFloat) {
  Tensor t = Random({5, 3}, 66);
  const std::vector<float> before = Get(t);
  ASSERT_TRUE(backend_.Scale(0.37f, &t).ok());
  const std::vector<float> after = Get(t);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i] * 0.37f) << i;
}

TEST_P(CpuBackendTest, HostDeviceRoundTripIsCounted) {
  Tensor d = Random({10, 10}, 70);
  const std::vector<float> want = Get(d);
  const int64_t dev0 = backend_.device_allocator().current_bytes();
  auto h = backend_.CopyToHost(d, "offload");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->location(), Location::kHost);
  EXPECT_EQ(backend_.host_allocator().current_bytes(), 400);
  d.Reset();
  EXPECT_EQ(backend_.device_allocator().current_bytes(), dev0 - 400);
  EXPECT_EQ(backend_.Fill(0, &*h).code(), absl::StatusCode::kInvalidArgument);  // host tensor
  auto back = backend_.CopyToDevice(*h, "reload");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(Get(*back), want);
  h->Reset();
  EXPECT_EQ(backend_.host_allocator().current_bytes(), 0);
}

TEST(CountingAllocatorTest, CountsPeakAndEnforcesBudget) {
  CpuBackend backend({.device_budget_bytes = 1000});
  CountingAllocator& alloc = backend.device_allocator();
  auto a = alloc.Allocate({100}, "a");
  ASSERT_TRUE(a.ok());
  {
    auto b = alloc.Allocate({100}, "b");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(alloc.current_bytes(), 800);
    auto c = alloc.Allocate({60}, "stage 3 activations");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(c.status().message().find("stage 3 activations"), std::string::npos);
  }
  EXPECT_EQ(alloc.current_bytes(), 400);
  EXPECT_EQ(alloc.peak_bytes(), 800);
  alloc.ResetPeak();
  EXPECT_EQ(alloc.peak_bytes(), 400);
  Tensor moved = std::move(*a);
  EXPECT_EQ(alloc.live_allocations(), 1);
  moved.Reset();
  EXPECT_EQ(alloc.current_bytes(), 0);
  EXPECT_EQ(alloc.Allocate({-1}, "neg").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipetrain::kernels
