// Every CudaBackend op against the CpuBackend op on the same random non-zero inputs; the column
// reductions and the embedding gradient also at sizes with many row chunks and heavily repeated
// ids, and run twice to prove them bitwise deterministic; the scratch the backend holds counted
// (and refused by a budget); the argmax of a row without a finite logit. The whole GPT chunk F/B/W
// on both backends is tests/cuda/cuda_gpt_chunk_test.cc. Skipped (GTEST_SKIP) when no CUDA device
// is visible; always compiled and linked when CUDA is enabled. Tolerance: |cuda - cpu| <= 1e-4 +
// 1e-3 |cpu| (fp32; different summation orders), bf16 GEMM: 2e-2 + 2e-2 |cpu|.
#include "kernels/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>

#include "glog/logging.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/kernels/reference_ops.h"

namespace pipetrain::kernels::cuda {
namespace {

using testing::RandomNonZero;

class CudaVsCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible (no GPU or no driver)";
    auto be = CudaBackend::Create({});
    ASSERT_TRUE(be.ok()) << be.status();
    gpu_ = *std::move(be);
  }
  // A pair of equal tensors, one per backend.
  struct Pair {
    Tensor cpu, gpu;
  };
  Pair Random(const Shape& shape, uint32_t seed, float scale = 1.0f) {
    const std::vector<float> v = RandomNonZero(NumElements(shape), seed, scale);
    return {*cpu_.FromHost(shape, v, "t"), *gpu_->FromHost(shape, v, "t")};
  }
  Pair Empty(const Shape& shape) { return {*cpu_.Zeros(shape, "t"), *gpu_->Zeros(shape, "t")}; }
  void ExpectClose(const Pair& p, const char* what, double atol = 1e-4, double rtol = 1e-3) {
    const std::vector<float> a = *cpu_.ToVector(p.cpu), b = *gpu_->ToVector(p.gpu);
    ASSERT_EQ(a.size(), b.size());
    int bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::abs(a[i] - b[i]) > atol + rtol * std::abs(a[i]) && ++bad < 5) {
        ADD_FAILURE() << what << "[" << i << "] cpu " << a[i] << " cuda " << b[i];
      }
    }
  }

  CpuBackend cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

#define BOTH(call_cpu, call_gpu)  \
  do {                            \
    ASSERT_TRUE((call_cpu).ok()); \
    ASSERT_TRUE((call_gpu).ok()); \
  } while (0)

TEST_F(CudaVsCpuTest, GemmAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Pair a = Random(ta ? Shape{37, 19} : Shape{19, 37}, 1);
      Pair b = Random(tb ? Shape{23, 37} : Shape{37, 23}, 2);
      Pair c = Random({19, 23}, 3);
      BOTH(cpu_.Gemm(a.cpu, ta, b.cpu, tb, 0.5f, 1.0f, &c.cpu),
           gpu_->Gemm(a.gpu, ta, b.gpu, tb, 0.5f, 1.0f, &c.gpu));
      ExpectClose(c, "gemm");
    }
  }
}

TEST_F(CudaVsCpuTest, Bf16GemmIsCloseToFp32) {
  auto bf = CudaBackend::Create({.bf16_gemm = true});
  ASSERT_TRUE(bf.ok());
  const std::vector<float> av = RandomNonZero(64 * 48, 4), bv = RandomNonZero(48 * 32, 5);
  Tensor a = *cpu_.FromHost({64, 48}, av, "a"), b = *cpu_.FromHost({48, 32}, bv, "b");
  Tensor c = *cpu_.Zeros({64, 32}, "c");
  ASSERT_TRUE(cpu_.Gemm(a, false, b, false, 1, 0, &c).ok());
  Tensor ga = *(*bf)->FromHost({64, 48}, av, "a"), gb = *(*bf)->FromHost({48, 32}, bv, "b");
  Tensor gc = *(*bf)->Zeros({64, 32}, "c");
  ASSERT_TRUE((*bf)->Gemm(ga, false, gb, false, 1, 0, &gc).ok());
  const std::vector<float> want = *cpu_.ToVector(c), got = *(*bf)->ToVector(gc);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-2 + 2e-2 * std::abs(want[i])) << i;
  }
}

// The CPU twin of a bf16 GEMM (inputs rounded to bf16, fp32 sgemm) computes what cuBLAS does with
// bf16 operands and fp32 accumulation: the same exact products, summed in another order.
TEST_F(CudaVsCpuTest, Bf16GemmMatchesTheCpuTwin) {
  auto bf = CudaBackend::Create({.bf16_gemm = true});
  ASSERT_TRUE(bf.ok());
  CpuBackend twin({.bf16_gemm = true});
  const std::vector<float> av = RandomNonZero(64 * 48, 14), bv = RandomNonZero(48 * 32, 15);
  Tensor a = *twin.FromHost({64, 48}, av, "a"), b = *twin.FromHost({48, 32}, bv, "b");
  Tensor c = *twin.Zeros({64, 32}, "c");
  ASSERT_TRUE(twin.Gemm(a, false, b, false, 1, 0, &c).ok());
  Tensor ga = *(*bf)->FromHost({64, 48}, av, "a"), gb = *(*bf)->FromHost({48, 32}, bv, "b");
  Tensor gc = *(*bf)->Zeros({64, 32}, "c");
  ASSERT_TRUE((*bf)->Gemm(ga, false, gb, false, 1, 0, &gc).ok());
  const std::vector<float> want = *twin.ToVector(c), got = *(*bf)->ToVector(gc);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::abs(want[i])) << i;
  }
}

// The bf16 stash: ToBf16 rounds exactly as the CPU does (round to nearest even), ToF32 is exact,
// and offload copies keep the type and the bytes.
TEST_F(CudaVsCpuTest, Bf16StashConversionIsBitwiseTheCpus) {
  std::vector<float> values = RandomNonZero(4096, 16);
  values[0] = 1.0f + 1.0f / 256;      // a tie: to even (1.0)
  values[1] = 1.0f + 3.0f / 256;      // a tie: to even (up)
  values[2] = -0.0f;
  values[3] = std::numeric_limits<float>::infinity();
  Tensor x = *cpu_.FromHost({64, 64}, values, "x");
  Tensor gx = *gpu_->FromHost({64, 64}, values, "x");
  Tensor narrow = *cpu_.ToBf16(x, "narrow");
  Tensor gnarrow = *gpu_->ToBf16(gx, "narrow");
  EXPECT_EQ(gnarrow.dtype(), DType::kBF16);
  EXPECT_EQ(gnarrow.bytes(), 4096 * 2);
  const std::vector<float> want = *cpu_.ToVector(narrow), got = *gpu_->ToVector(gnarrow);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  Tensor host = *gpu_->CopyToHost(gnarrow, "offloaded");
  EXPECT_EQ(host.dtype(), DType::kBF16);
  Tensor back = *gpu_->CopyToDevice(host, "reloaded");
  Tensor wide = *gpu_->ToF32(back, "wide");
  const std::vector<float> reloaded = *gpu_->ToVector(wide);
  EXPECT_EQ(std::memcmp(reloaded.data(), want.data(), want.size() * sizeof(float)), 0);
}

TEST_F(CudaVsCpuTest, ElementwiseBiasAndAdamW) {
  Pair x = Random({33, 17}, 6), y = Random({33, 17}, 7), out = Empty({33, 17});
  Pair bias = Random({17}, 8), db = Random({17}, 9);
  BOTH(cpu_.Add(x.cpu, y.cpu, &out.cpu), gpu_->Add(x.gpu, y.gpu, &out.gpu));
  ExpectClose(out, "add");
  BOTH(cpu_.AddInPlace(x.cpu, &y.cpu), gpu_->AddInPlace(x.gpu, &y.gpu));
  ExpectClose(y, "addinplace");
  BOTH(cpu_.AddBias(bias.cpu, &y.cpu), gpu_->AddBias(bias.gpu, &y.gpu));
  ExpectClose(y, "addbias");
  BOTH(cpu_.BiasGrad(y.cpu, true, &db.cpu), gpu_->BiasGrad(y.gpu, true, &db.gpu));
  ExpectClose(db, "biasgrad");
  BOTH(cpu_.BiasRows(bias.cpu, &x.cpu, &out.cpu), gpu_->BiasRows(bias.gpu, &x.gpu, &out.gpu));
  ExpectClose(out, "biasrows");
  Pair w = Random({17, 17}, 13);
  BOTH(cpu_.Linear(x.cpu, w.cpu, bias.cpu, &y.cpu, &out.cpu),
       gpu_->Linear(x.gpu, w.gpu, bias.gpu, &y.gpu, &out.gpu));
  ExpectClose(out, "linear");
  Pair g = Random({33, 17}, 10), m = Random({33, 17}, 11, 0.1f), v = Random({33, 17}, 12, 0.1f);
  for (Pair* p : {&v}) {  // second moments must be non-negative
    std::vector<float> h = *cpu_.ToVector(p->cpu);
    for (float& e : h) e = std::abs(e);
    ASSERT_TRUE(cpu_.Upload(h, &p->cpu).ok());
    ASSERT_TRUE(gpu_->Upload(h, &p->gpu).ok());
  }
  const AdamWConfig cfg{
      .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  BOTH(cpu_.AdamWUpdate(cfg, 2, g.cpu, &x.cpu, &m.cpu, &v.cpu),
       gpu_->AdamWUpdate(cfg, 2, g.gpu, &x.gpu, &m.gpu, &v.gpu));
  ExpectClose(x, "adamw p");
  ExpectClose(v, "adamw v");
}

TEST_F(CudaVsCpuTest, EmbeddingLayerNormGelu) {
  const int64_t V = 29, H = 40, T = 7, B = 3;
  std::vector<int32_t> ids(B * T);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 11 + 5) % V);
  Pair wte = Random({V, H}, 13), wpe = Random({T, H}, 14), e = Empty({B * T, H});
  BOTH(cpu_.EmbeddingForward(ids, T, wte.cpu, wpe.cpu, &e.cpu),
       gpu_->EmbeddingForward(ids, T, wte.gpu, wpe.gpu, &e.gpu));
  ExpectClose(e, "embedding");
  BOTH(cpu_.EmbeddingBackward(ids, T, e.cpu, true, &wte.cpu, &wpe.cpu),
       gpu_->EmbeddingBackward(ids, T, e.gpu, true, &wte.gpu, &wpe.gpu));
  ExpectClose(wte, "dwte");
  ExpectClose(wpe, "dwpe");
  Pair g = Random({H}, 15), b = Random({H}, 16), y = Empty({B * T, H}), mean = Empty({B * T}),
       rstd = Empty({B * T}), dy = Random({B * T, H}, 17), dx = Empty({B * T, H});
  BOTH(cpu_.LayerNormForward(e.cpu, g.cpu, b.cpu, &y.cpu, &mean.cpu, &rstd.cpu),
       gpu_->LayerNormForward(e.gpu, g.gpu, b.gpu, &y.gpu, &mean.gpu, &rstd.gpu));
  ExpectClose(y, "ln");
  BOTH(cpu_.LayerNormBackwardInput(dy.cpu, e.cpu, g.cpu, mean.cpu, rstd.cpu, &dx.cpu),
       gpu_->LayerNormBackwardInput(dy.gpu, e.gpu, g.gpu, mean.gpu, rstd.gpu, &dx.gpu));
  ExpectClose(dx, "ln dx");
  Pair dx_plus = Empty({B * T, H});
  BOTH(cpu_.LayerNormBackwardInput(dy.cpu, e.cpu, g.cpu, mean.cpu, rstd.cpu, &dx_plus.cpu, &y.cpu),
       gpu_->LayerNormBackwardInput(dy.gpu, e.gpu, g.gpu, mean.gpu, rstd.gpu, &dx_plus.gpu,
                                    &y.gpu));
  ExpectClose(dx_plus, "ln dx + residual");
  BOTH(cpu_.LayerNormBackwardWeight(dy.cpu, e.cpu, mean.cpu, rstd.cpu, false, &g.cpu, &b.cpu),
       gpu_->LayerNormBackwardWeight(dy.gpu, e.gpu, mean.gpu, rstd.gpu, false, &g.gpu, &b.gpu));
  ExpectClose(g, "ln dgamma");
  ExpectClose(b, "ln dbeta");
  BOTH(cpu_.GeluForward(dy.cpu, &y.cpu), gpu_->GeluForward(dy.gpu, &y.gpu));
  ExpectClose(y, "gelu");
  BOTH(cpu_.GeluBackward(e.cpu, dy.cpu, &dx.cpu), gpu_->GeluBackward(e.gpu, dy.gpu, &dx.gpu));
  ExpectClose(dx, "gelu dx");
}

TEST_F(CudaVsCpuTest, CausalAttention) {
  const int64_t B = 2, T = 9, nh = 3, H = 24;
  Pair qkv = Random({B * T, 3 * H}, 18), out = Empty({B * T, H});
  BOTH(cpu_.AttentionForward(qkv.cpu, B, T, nh, &out.cpu),
       gpu_->AttentionForward(qkv.gpu, B, T, nh, &out.gpu));
  ExpectClose(out, "attn out");
  Pair dout = Random({B * T, H}, 19), dqkv = Empty({B * T, 3 * H});
  BOTH(cpu_.AttentionBackward(dout.cpu, qkv.cpu, B, T, nh, &dqkv.cpu),
       gpu_->AttentionBackward(dout.gpu, qkv.gpu, B, T, nh, &dqkv.gpu));
  ExpectClose(dqkv, "dqkv");
}

// bf16 attention: the tensor-core products read the inputs the CPU twin rounds (q, k, v, dO, P,
// dS), so the two agree to fp32 summation-order accuracy, except where a probability or score
// gradient computed in another order rounds to the neighbouring bf16 value (rare; one bf16 ulp
// of one term): 1e-3 + 1e-2 |cpu|. Also at a T that is a multiple of the tensor-core tiles.
TEST_F(CudaVsCpuTest, Bf16AttentionMatchesTheCpuTwin) {
  auto bf = CudaBackend::Create({.bf16_gemm = true});
  ASSERT_TRUE(bf.ok()) << bf.status();
  CpuBackend twin({.bf16_gemm = true});
  for (const int64_t T : {9, 128}) {
    const int64_t B = 2, nh = 4, H = 64;
    const std::vector<float> qv = RandomNonZero(B * T * 3 * H, 60);
    const std::vector<float> dv = RandomNonZero(B * T * H, 61);
    Tensor q = *twin.FromHost({B * T, 3 * H}, qv, "qkv");
    Tensor gq = *(*bf)->FromHost({B * T, 3 * H}, qv, "qkv");
    Tensor o = *twin.Zeros({B * T, H}, "o"), go = *(*bf)->Zeros({B * T, H}, "o");
    ASSERT_TRUE(twin.AttentionForward(q, B, T, nh, &o).ok());
    ASSERT_TRUE((*bf)->AttentionForward(gq, B, T, nh, &go).ok());
    Tensor d = *twin.FromHost({B * T, H}, dv, "dout");
    Tensor gd = *(*bf)->FromHost({B * T, H}, dv, "dout");
    Tensor dq = *twin.Zeros({B * T, 3 * H}, "dqkv"), gdq = *(*bf)->Zeros({B * T, 3 * H}, "dqkv");
    ASSERT_TRUE(twin.AttentionBackward(d, q, B, T, nh, &dq).ok());
    ASSERT_TRUE((*bf)->AttentionBackward(gd, gq, B, T, nh, &gdq).ok());
    for (const auto& [want, got, what] :
         {std::tuple{*twin.ToVector(o), *(*bf)->ToVector(go), "out"},
          std::tuple{*twin.ToVector(dq), *(*bf)->ToVector(gdq), "dqkv"}}) {
      int bad = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::abs(got[i] - want[i]) > 1e-3 + 1e-2 * std::abs(want[i]) && ++bad <= 5) {
          ADD_FAILURE() << what << " T=" << T << " [" << i << "]: gpu " << got[i] << " cpu "
                        << want[i];
        }
      }
      EXPECT_EQ(bad, 0) << what << " T=" << T;
    }
  }
}

TEST_F(CudaVsCpuTest, CrossEntropy) {
  const int64_t N = 13, V = 300;
  Pair logits = Random({N, V}, 20, 4.0f), probs = Empty({N, V}), dl = Empty({N, V});
  std::vector<int32_t> targets(N);
  for (int64_t i = 0; i < N; ++i) targets[i] = static_cast<int32_t>((i * 37) % V);
  targets[4] = kIgnoreTarget;
  auto a = cpu_.CrossEntropyForward(logits.cpu, targets, &probs.cpu);
  auto b = gpu_->CrossEntropyForward(logits.gpu, targets, &probs.gpu);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(a->loss, b->loss, 1e-4);
  EXPECT_EQ(a->valid_targets, b->valid_targets);
  EXPECT_EQ(a->predictions, b->predictions);
  ExpectClose(probs, "ce probs");
  BOTH(cpu_.CrossEntropyBackward(probs.cpu, targets, 0.5f, &dl.cpu),
       gpu_->CrossEntropyBackward(probs.gpu, targets, 0.5f, &dl.gpu));
  ExpectClose(dl, "ce dlogits");
}

TEST_F(CudaVsCpuTest, TransfersAndCounting) {
  Pair x = Random({100}, 21);
  const int64_t before = gpu_->device_allocator().current_bytes();
  auto host = gpu_->CopyToHost(x.gpu, "offload");
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(gpu_->host_allocator().current_bytes(), 400);
  x.gpu.Reset();
  EXPECT_EQ(gpu_->device_allocator().current_bytes(), before - 400);
  auto back = gpu_->CopyToDevice(*host, "reload");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*gpu_->ToVector(*back), *cpu_.ToVector(x.cpu));
}

// Sums of thousands of O(1) terms in fp32 carry ~1e-4 of rounding in either order; a wrong sum
// is off by O(1).
constexpr double kLongSumAtol = 1e-3;

// Runs `op` twice on fresh GPU outputs made by `make` and returns both results.
template <typename Make, typename Op>
std::pair<std::vector<float>, std::vector<float>> TwiceOnGpu(CudaBackend* gpu, Make make, Op op) {
  std::vector<float> results[2];
  for (auto& result : results) {
    Tensor out = make();
    EXPECT_TRUE(op(&out).ok());
    result = *gpu->ToVector(out);
  }
  return {results[0], results[1]};
}

TEST_F(CudaVsCpuTest, ColumnReductionsMatchTheCpuAndAreBitwiseRepeatable) {
  // 3000 rows: 24 row chunks of 128 in pass 1; 5 rows: one partial chunk; 200 and 33 columns:
  // partial column tiles.
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{3000, 200}, {5, 33}}) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " accumulate " << accumulate);
      Pair dy = Random({rows, cols}, 30), x = Random({rows, cols}, 31), db = Random({cols}, 32);
      Pair g = Random({cols}, 33), b = Random({cols}, 34), y = Empty({rows, cols});
      Pair mean = Empty({rows}), rstd = Empty({rows});
      BOTH(cpu_.LayerNormForward(x.cpu, g.cpu, b.cpu, &y.cpu, &mean.cpu, &rstd.cpu),
           gpu_->LayerNormForward(x.gpu, g.gpu, b.gpu, &y.gpu, &mean.gpu, &rstd.gpu));
      const std::vector<float> db0 = *cpu_.ToVector(db.cpu);
      auto fresh = [&] { return *gpu_->FromHost({cols}, db0, "db"); };
      auto [first, second] = TwiceOnGpu(
          gpu_.get(), fresh, [&](Tensor* out) { return gpu_->BiasGrad(dy.gpu, accumulate, out); });
      EXPECT_EQ(first, second) << "BiasGrad is not bitwise repeatable";
      ASSERT_TRUE(cpu_.BiasGrad(dy.cpu, accumulate, &db.cpu).ok());
      ASSERT_TRUE(gpu_->Upload(first, &db.gpu).ok());
      ExpectClose(db, "biasgrad", kLongSumAtol);

      std::vector<float> runs[2][2];
      for (auto& run : runs) {
        Tensor dg = fresh(), dbeta = fresh();
        ASSERT_TRUE(gpu_->LayerNormBackwardWeight(dy.gpu, x.gpu, mean.gpu, rstd.gpu, accumulate,
                                                  &dg, &dbeta)
                        .ok());
        run[0] = *gpu_->ToVector(dg);
        run[1] = *gpu_->ToVector(dbeta);
      }
      EXPECT_EQ(runs[0][0], runs[1][0]) << "dgamma is not bitwise repeatable";
      EXPECT_EQ(runs[0][1], runs[1][1]) << "dbeta is not bitwise repeatable";
      Pair dg = Random({cols}, 32), dbeta = Random({cols}, 32);
      ASSERT_TRUE(cpu_.LayerNormBackwardWeight(dy.cpu, x.cpu, mean.cpu, rstd.cpu, accumulate,
                                               &dg.cpu, &dbeta.cpu)
                      .ok());
      ASSERT_TRUE(gpu_->Upload(runs[0][0], &dg.gpu).ok());
      ASSERT_TRUE(gpu_->Upload(runs[0][1], &dbeta.gpu).ok());
      ExpectClose(dg, "ln dgamma", kLongSumAtol);
      ExpectClose(dbeta, "ln dbeta", kLongSumAtol);
    }
  }
}

TEST_F(CudaVsCpuTest, EmbeddingBackwardWithRepeatedIdsMatchesTheCpuAndIsBitwiseRepeatable) {
  const int64_t V = 50, H = 96, T = 128, B = 32;
  std::vector<int32_t> ids(B * T);
  std::mt19937 rng(35);
  for (auto& id : ids) {
    const uint32_t r = rng() % 8;
    // Half the tokens are id 3 (about 2000: many segments), a quarter id 9, the rest spread.
    id = r < 4 ? 3 : (r < 6 ? 9 : static_cast<int32_t>(rng() % V));
  }
  Pair dout = Random({B * T, H}, 36);
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    Pair wte = Random({V, H}, 37), wpe = Random({T, H}, 38);
    const std::vector<float> wte0 = *cpu_.ToVector(wte.cpu), wpe0 = *cpu_.ToVector(wpe.cpu);
    std::vector<float> runs[2][2];
    for (auto& run : runs) {
      Tensor dwte = *gpu_->FromHost({V, H}, wte0, "dwte");
      Tensor dwpe = *gpu_->FromHost({T, H}, wpe0, "dwpe");
      ASSERT_TRUE(gpu_->EmbeddingBackward(ids, T, dout.gpu, accumulate, &dwte, &dwpe).ok());
      run[0] = *gpu_->ToVector(dwte);
      run[1] = *gpu_->ToVector(dwpe);
    }
    EXPECT_EQ(runs[0][0], runs[1][0]) << "dwte is not bitwise repeatable";
    EXPECT_EQ(runs[0][1], runs[1][1]) << "dwpe is not bitwise repeatable";
    ASSERT_TRUE(cpu_.EmbeddingBackward(ids, T, dout.cpu, accumulate, &wte.cpu, &wpe.cpu).ok());
    ASSERT_TRUE(gpu_->Upload(runs[0][0], &wte.gpu).ok());
    ASSERT_TRUE(gpu_->Upload(runs[0][1], &wpe.gpu).ok());
    ExpectClose(wte, "dwte", kLongSumAtol);
    ExpectClose(wpe, "dwpe", kLongSumAtol);
  }
}

TEST_F(CudaVsCpuTest, ArgmaxOfARowWithoutAFiniteLogitIsZeroLikeTheCpu) {
  const int64_t V = 300;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits(3 * V, -inf);
  for (int64_t j = 0; j < V; ++j) logits[V + j] = std::numeric_limits<float>::quiet_NaN();
  logits[2 * V + 5] = -FLT_MAX;  // the only value above -inf: both backends pick it
  const std::vector<int32_t> targets = {kIgnoreTarget, kIgnoreTarget, 5};
  Tensor lc = *cpu_.FromHost({3, V}, logits, "logits"), pc = *cpu_.Zeros({3, V}, "probs");
  Tensor lg = *gpu_->FromHost({3, V}, logits, "logits"), pg = *gpu_->Zeros({3, V}, "probs");
  auto a = cpu_.CrossEntropyForward(lc, targets, &pc);
  auto b = gpu_->CrossEntropyForward(lg, targets, &pg);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->predictions, (std::vector<int32_t>{0, 0, 5}));
  EXPECT_EQ(b->predictions, a->predictions);
  EXPECT_NEAR(b->loss, a->loss, 1e-6);
}

TEST_F(CudaVsCpuTest, AllFiniteAgreesWithTheCpu) {
  Pair a = Random({257, 33}, 46), b = Random({5}, 47);
  absl::StatusOr<bool> cpu = cpu_.AllFinite({&a.cpu, &b.cpu});
  absl::StatusOr<bool> gpu = gpu_->AllFinite({&a.gpu, &b.gpu});
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << cpu.status() << " " << gpu.status();
  EXPECT_TRUE(*gpu);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> v = *cpu_.ToVector(a.cpu);
    v[257 * 33 - 1] = bad;
    ASSERT_TRUE(gpu_->Upload(v, &a.gpu).ok());
    gpu = gpu_->AllFinite({&b.gpu, &a.gpu});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_FALSE(*gpu) << bad;
    // The flag is reset for every call: finite tensors alone are finite again.
    gpu = gpu_->AllFinite({&b.gpu});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_TRUE(*gpu);
  }
}

// Gradient clipping's ops: the sum of squares is bitwise the CPU's (it sums on the host in the
// same order), and Scale is one float multiply per element on both.
TEST_F(CudaVsCpuTest, SumOfSquaresAndScaleAreBitwiseTheCpus) {
  Pair a = Random({257, 33}, 48);
  absl::StatusOr<double> cpu = cpu_.SumOfSquares(a.cpu);
  absl::StatusOr<double> gpu = gpu_->SumOfSquares(a.gpu);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << cpu.status() << " " << gpu.status();
  EXPECT_EQ(*gpu, *cpu);
  // Large enough for lanes summed on the device (2^16 of them here, and a ragged last row).
  Pair big = Random({(int64_t{1} << 28) / 1024 + 7, 1024}, 49);
  cpu = cpu_.SumOfSquares(big.cpu);
  gpu = gpu_->SumOfSquares(big.gpu);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << cpu.status() << " " << gpu.status();
  EXPECT_EQ(*gpu, *cpu);
  ASSERT_TRUE(cpu_.Scale(0.3f, &a.cpu).ok());
  ASSERT_TRUE(gpu_->Scale(0.3f, &a.gpu).ok());
  EXPECT_EQ(*gpu_->ToVector(a.gpu), *cpu_.ToVector(a.cpu));
}

TEST_F(CudaVsCpuTest, ScratchIsCountedAndABudgetRefusesItNamingTheOp) {
  CountingAllocator& dev = gpu_->device_allocator();
  // The cuBLAS workspace is scratch from the start.
  EXPECT_EQ(dev.scratch_bytes(), CudaBackendOptions{}.cublas_workspace_bytes);
  EXPECT_EQ(dev.current_bytes(), dev.scratch_bytes());
  const int64_t B = 1, T = 256, nh = 4, H = 64;
  Pair qkv = Random({B * T, 3 * H}, 40), out = Empty({B * T, H});
  Pair dout = Random({B * T, H}, 41), dqkv = Empty({B * T, 3 * H});
  BOTH(cpu_.AttentionForward(qkv.cpu, B, T, nh, &out.cpu),
       gpu_->AttentionForward(qkv.gpu, B, T, nh, &out.gpu));
  // The forward's probabilities scratch (heads x T^2) is held; the backward adds its score
  // gradients' (as much again).
  const int64_t attention_scratch = nh * T * T * 4;  // 1 MiB
  const int64_t before = dev.current_bytes();
  dev.set_budget_bytes(before + attention_scratch - 1);
  const absl::Status refused =
      gpu_->AttentionBackward(dout.gpu, qkv.gpu, B, T, nh, &dqkv.gpu);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("AttentionBackward"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find(std::to_string(attention_scratch)), std::string::npos)
      << refused;
  dev.set_budget_bytes(CountingAllocator::kUnlimited);
  dev.ResetPeak();
  const int64_t scratch_before = dev.scratch_bytes();
  BOTH(cpu_.AttentionBackward(dout.cpu, qkv.cpu, B, T, nh, &dqkv.cpu),
       gpu_->AttentionBackward(dout.gpu, qkv.gpu, B, T, nh, &dqkv.gpu));
  ExpectClose(dqkv, "dqkv");
  EXPECT_EQ(dev.scratch_bytes(), scratch_before + attention_scratch);
  EXPECT_GE(dev.peak_bytes(), before + attention_scratch);
  // Staged token ids are scratch too.
  const int64_t with_attention = dev.scratch_bytes();
  std::vector<int32_t> ids(B * T, 1);
  Pair wte = Random({8, H}, 42), wpe = Random({T, H}, 43), e = Empty({B * T, H});
  BOTH(cpu_.EmbeddingForward(ids, T, wte.cpu, wpe.cpu, &e.cpu),
       gpu_->EmbeddingForward(ids, T, wte.gpu, wpe.gpu, &e.gpu));
  EXPECT_EQ(dev.scratch_bytes(), with_attention + B * T * 4);
}

TEST_F(CudaVsCpuTest, Bf16GemmInputCopiesAreCountedScratch) {
  CudaBackendOptions options;
  options.bf16_gemm = true;
  auto bf = CudaBackend::Create(options);
  ASSERT_TRUE(bf.ok()) << bf.status();
  Tensor a = *(*bf)->FromHost({64, 48}, RandomNonZero(64 * 48, 44), "a");
  Tensor b = *(*bf)->FromHost({48, 32}, RandomNonZero(48 * 32, 45), "b");
  Tensor c = *(*bf)->Zeros({64, 32}, "c");
  const int64_t scratch = (*bf)->device_allocator().scratch_bytes();
  ASSERT_TRUE((*bf)->Gemm(a, false, b, false, 1, 0, &c).ok());
  EXPECT_EQ((*bf)->device_allocator().scratch_bytes(), scratch + (64 * 48 + 48 * 32) * 2);
}

TEST(CudaBackendBudgetTest, ABudgetBelowTheCublasWorkspaceRefusesCreate) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible (no GPU or no driver)";
  CudaBackendOptions options;
  options.device_budget_bytes = 1 << 20;
  auto be = CudaBackend::Create(options);
  ASSERT_FALSE(be.ok());
  EXPECT_EQ(be.status().code(), absl::StatusCode::kResourceExhausted) << be.status();
  EXPECT_NE(be.status().message().find("cuBLAS workspace"), std::string::npos) << be.status();
}

TEST(CudaBackendNoDeviceTest, CreateFailsCleanlyWithoutDevice) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto be = CudaBackend::Create({});
  EXPECT_EQ(be.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pipetrain::kernels::cuda
