// Finite-difference gradient checks for every layer type (embedding, transformer block, head)
// as single-layer chunks and for a whole 2-layer model, plus "B then W equals BW".
// The model runs in fp32; the checked function is L = <output, R> for a random R (or the loss for
// chunks with the head), evaluated by the fp32 forward and differenced in float64 with a central
// step h = 1e-2 (parameters are random with std 0.2). Tolerance per coordinate:
// |fd - analytic| <= 2e-3 + 3e-2 * |analytic| (fp32 forward noise / h ~ 1e-4, truncation O(h^2)).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "tests/model/model_test_util.h"

namespace pipetrain::model {
namespace {

using kernels::Tensor;

constexpr int kEvalMb = 1000;

struct Probe {
  GptChunk* chunk;
  std::vector<int32_t> tokens, targets;
  std::vector<float> input;  // for chunks without the embedding
  std::vector<float> r;      // output weights for chunks without the head
};

ForwardInput MakeInput(Probe& p) {
  ForwardInput in;
  if (p.chunk->spec().has_embedding) {
    in.tokens = p.tokens;
  } else {
    in.activation = *p.chunk->backend()->FromHost(
        {static_cast<int64_t>(p.input.size()) / p.chunk->config().hidden, p.chunk->config().hidden},
        p.input, "input");
  }
  if (p.chunk->spec().has_head) in.targets = p.targets;
  return in;
}

double Loss(Probe& p) {
  auto out = p.chunk->Forward(kEvalMb, MakeInput(p));
  CHECK(out.ok()) << out.status();
  double l = 0;
  if (p.chunk->spec().has_head) {
    l = out->loss;
  } else {
    const std::vector<float> y = *p.chunk->backend()->ToVector(out->activation);
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * p.r[i];
  }
  p.chunk->Discard(kEvalMb);
  return l;
}

// Runs F/B/W on microbatch 0 and returns dL/dinput (empty for the first chunk).
std::vector<float> Analytic(Probe& p, bool fused) {
  CHECK(p.chunk->ZeroGrad().ok());
  CHECK(p.chunk->Forward(0, MakeInput(p)).ok());
  Tensor dy;
  if (!p.chunk->spec().has_head) {
    dy = *p.chunk->backend()->FromHost({static_cast<int64_t>(p.r.size())}, p.r, "dy");
  }
  absl::StatusOr<Tensor> dx =
      fused ? p.chunk->Backward(0, std::move(dy)) : p.chunk->BackwardInput(0, std::move(dy));
  CHECK(dx.ok()) << dx.status();
  if (!fused) CHECK(p.chunk->BackwardWeight(0).ok());
  if (dx->empty()) return {};
  return *p.chunk->backend()->ToVector(*dx);
}

bool Close(double fd, double an) { return std::abs(fd - an) <= 2e-3 + 3e-2 * std::abs(an); }

void CheckGradients(Probe& p) {
  const std::vector<float> dx = Analytic(p, /*fused=*/false);
  const double h = 1e-2;
  kernels::Backend* be = p.chunk->backend();
  int checked = 0;
  for (Parameter* param : p.chunk->parameters()) {
    std::vector<float> v = *be->ToVector(param->value);
    const std::vector<float> g = *be->ToVector(param->grad);
    const int64_t n = static_cast<int64_t>(v.size());
    for (int64_t k = 0; k < 6; ++k) {
      const int64_t i = (k * 7919 + 13) % n;
      const float old = v[i];
      v[i] = old + static_cast<float>(h);
      CHECK(be->Upload(v, &param->value).ok());
      const double lp = Loss(p);
      v[i] = old - static_cast<float>(h);
      CHECK(be->Upload(v, &param->value).ok());
      const double lm = Loss(p);
      v[i] = old;
      CHECK(be->Upload(v, &param->value).ok());
      const double fd = (lp - lm) / (2 * h);
      EXPECT_TRUE(Close(fd, g[i]))
          << param->name << "[" << i << "] fd " << fd << " analytic " << g[i];
      ++checked;
    }
  }
  if (!p.input.empty()) {
    ASSERT_EQ(dx.size(), p.input.size());
    for (int64_t k = 0; k < 24; ++k) {
      const size_t i = static_cast<size_t>((k * 104729 + 5) % p.input.size());
      const float old = p.input[i];
      p.input[i] = old + static_cast<float>(h);
      const double lp = Loss(p);
      p.input[i] = old - static_cast<float>(h);
      const double lm = Loss(p);
      p.input[i] = old;
      const double fd = (lp - lm) / (2 * h);
      EXPECT_TRUE(Close(fd, dx[i])) << "input[" << i << "] fd " << fd << " analytic " << dx[i];
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

class GradCheckTest : public ::testing::Test {
 protected:
  Probe MakeProbe(const ChunkSpec& spec) {
    auto c = GptChunk::Create(&backend_, config_, spec);
    CHECK(c.ok()) << c.status();
    chunk_ = *std::move(c);
    testing::RandomizeParameters(chunk_.get(), 99);
    Probe p{chunk_.get(),
            testing::RandomTokens(kBatch * config_.seq_len, config_.vocab, 1),
            testing::RandomTokens(kBatch * config_.seq_len, config_.vocab, 2),
            {},
            {}};
    p.targets[3] = kernels::kIgnoreTarget;
    const int64_t nh = kBatch * config_.seq_len * config_.hidden;
    if (!spec.has_embedding) p.input = NormalValues(5, 0, "input", nh, 1.0f);
    if (!spec.has_head) p.r = NormalValues(6, 0, "r", nh, 1.0f);
    return p;
  }

  static constexpr int64_t kBatch = 2;
  kernels::CpuBackend backend_;
  GptConfig config_ = testing::TinyConfig(2);
  std::unique_ptr<GptChunk> chunk_;
};

TEST_F(GradCheckTest, EmbeddingLayer) {
  Probe p = MakeProbe({0, 0, true, false});
  CheckGradients(p);
}

TEST_F(GradCheckTest, TransformerBlock) {
  Probe p = MakeProbe({1, 1, false, false});
  CheckGradients(p);
}

TEST_F(GradCheckTest, HeadWithLoss) {
  Probe p = MakeProbe({0, 0, false, true});
  CheckGradients(p);
}

TEST_F(GradCheckTest, WholeTwoLayerModel) {
  Probe p = MakeProbe(WholeModel(config_));
  CheckGradients(p);
}

TEST_F(GradCheckTest, BackwardInputThenWeightEqualsFusedBackward) {
  for (const ChunkSpec& spec : {WholeModel(config_), ChunkSpec{1, 1, false, false}}) {
    Probe p = MakeProbe(spec);
    const std::vector<float> dx_split = Analytic(p, /*fused=*/false);
    const auto g_split = testing::Grads(chunk_.get());
    const std::vector<float> dx_fused = Analytic(p, /*fused=*/true);
    EXPECT_EQ(dx_split, dx_fused);
    EXPECT_EQ(g_split, testing::Grads(chunk_.get()));
    EXPECT_TRUE(chunk_->InFlightMicrobatches().empty());
  }
}

}  // namespace
}  // namespace pipetrain::model
