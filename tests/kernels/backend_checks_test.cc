// Backend's argument checks (kernels/backend.cc), which run before any backend's Do* op: every op
// accepts a well-formed call and rejects the same call with one argument wrong, with an
// InvalidArgument that names the op and the argument, before computing anything (the output it
// was given still holds the sentinel). Run on the CPU backend; the CUDA backend inherits the
// same checks, so this covers it too.
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace pipetrain::kernels {
namespace {

using ::testing::HasSubstr;

constexpr float kSentinel = 0.5f;

// Shapes of one small transformer-like case: R rows of width H, vocabulary V, batch x T tokens,
// `kHeads` heads over H.
constexpr int64_t kBatch = 2, kT = 2, kR = kBatch * kT, kH = 6, kV = 5, kHeads = 2;

class BackendChecksTest : public ::testing::Test {
 protected:
  // A device tensor of `shape` filled with kSentinel.
  Tensor Dev(const Shape& shape) {
    auto t = backend_.FromHost(shape, std::vector<float>(NumElements(shape), kSentinel), "test");
    EXPECT_TRUE(t.ok()) << t.status();
    return *std::move(t);
  }
  Tensor Host(const Shape& shape) {
    Tensor d = Dev(shape);
    return *backend_.CopyToHost(d, "host");
  }

  // `bad` fails with InvalidArgument whose message contains `want` and leaves `watch` (refilled
  // with kSentinel first) untouched; `good`, the same call with that argument right, succeeds.
  void ExpectChecked(const std::string& want, const std::function<absl::Status()>& bad,
                     Tensor* watch, const std::function<absl::Status()>& good) {
    for (int64_t i = 0; i < watch->numel(); ++i) watch->data()[i] = kSentinel;  // CPU: plain RAM
    const absl::Status s = bad();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << want << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(want));
    const std::vector<float> after(watch->data(), watch->data() + watch->numel());
    EXPECT_EQ(after, std::vector<float>(watch->numel(), kSentinel))
        << want << ": the op computed before its checks";
    const absl::Status ok = good();
    EXPECT_TRUE(ok.ok()) << want << " (the well-formed call): " << ok;
  }

  CpuBackend backend_;
};

TEST_F(BackendChecksTest, TransfersAndElementwise) {
  Tensor x = Dev({kR, kH}), y = Dev({kR, kH}), short_t = Dev({kR, kH - 1});
  std::vector<float> buf(kR * kH), short_buf(kR * kH - 1);
  ExpectChecked(
      "Upload: dst has 24 elements, want 23", [&] { return backend_.Upload(short_buf, &y); }, &y,
      [&] { return backend_.Upload(buf, &y); });
  ExpectChecked(
      "Download: src has 24 elements, want 23",
      [&] { return backend_.Download(x, absl::MakeSpan(short_buf)); }, &x,
      [&] { return backend_.Download(x, absl::MakeSpan(buf)); });
  Tensor host = Host({kR, kH});
  ExpectChecked(
      "CopyToHost: stash is a host tensor",
      [&] { return backend_.CopyToHost(host, "stash").status(); }, &x,
      [&] { return backend_.CopyToHost(x, "stash").status(); });
  ExpectChecked(
      "CopyToDevice: stash is not a host tensor",
      [&] { return backend_.CopyToDevice(x, "stash").status(); }, &x,
      [&] { return backend_.CopyToDevice(host, "stash").status(); });
  ExpectChecked(
      "Copy: dst has 20 elements, want 24", [&] { return backend_.Copy(x, &short_t); }, &short_t,
      [&] { return backend_.Copy(x, &y); });
  ExpectChecked(
      "Fill: t is a host tensor", [&] { return backend_.Fill(1.0f, &host); }, &host,
      [&] { return backend_.Fill(kSentinel, &y); });
  ExpectChecked(
      "AddInPlace: y has 20 elements", [&] { return backend_.AddInPlace(x, &short_t); }, &short_t,
      [&] { return backend_.AddInPlace(x, &y); });
  ExpectChecked(
      "Add: b has 20 elements", [&] { return backend_.Add(x, short_t, &y); }, &y,
      [&] { return backend_.Add(x, x, &y); });
  ExpectChecked(
      "Add: out has 20 elements", [&] { return backend_.Add(x, x, &short_t); }, &short_t,
      [&] { return backend_.Add(x, x, &y); });
  Tensor empty;
  ExpectChecked(
      "Add: a is empty", [&] { return backend_.Add(empty, x, &y); }, &y,
      [&] { return backend_.Add(x, x, &y); });
}

TEST_F(BackendChecksTest, GemmAndBias) {
  Tensor a = Dev({kR, kH}), b = Dev({kH, 3}), c = Dev({kR, 3}), c_wide = Dev({kR, 4});
  ExpectChecked(
      "Gemm: inner dimensions differ: a [4,6] x b [6,3]^T",
      [&] { return backend_.Gemm(a, false, b, true, 1, 0, &c); }, &c,
      [&] { return backend_.Gemm(a, false, b, false, 1, 0, &c); });
  ExpectChecked(
      "Gemm: c has shape [4,4]", [&] { return backend_.Gemm(a, false, b, false, 1, 0, &c_wide); },
      &c_wide, [&] { return backend_.Gemm(a, false, b, false, 1, 0, &c); });
  Tensor bias = Dev({kH}), bias_short = Dev({kH - 1}), y = Dev({kR, kH});
  ExpectChecked(
      "AddBias: bias has 5 elements, want 6", [&] { return backend_.AddBias(bias_short, &y); }, &y,
      [&] { return backend_.AddBias(bias, &y); });
  Tensor y_short = Dev({kR - 1, kH}), residual = Dev({kR, kH});
  ExpectChecked(
      "BiasRows: bias has 5 elements, want 6",
      [&] { return backend_.BiasRows(bias_short, nullptr, &y); }, &y,
      [&] { return backend_.BiasRows(bias, nullptr, &y); });
  ExpectChecked(
      "BiasRows: residual has 18 elements, want 24",
      [&] { return backend_.BiasRows(bias, &y_short, &y); }, &y,
      [&] { return backend_.BiasRows(bias, &residual, &y); });
  ExpectChecked(
      "BiasGrad: db has 5 elements, want 6",
      [&] { return backend_.BiasGrad(y, false, &bias_short); }, &bias_short,
      [&] { return backend_.BiasGrad(y, false, &bias); });
}

TEST_F(BackendChecksTest, Embedding) {
  std::vector<int32_t> ids = {0, 1, 4, 2};
  std::vector<int32_t> out_of_range = {0, 1, kV, 2};
  Tensor wte = Dev({kV, kH}), wpe = Dev({kT, kH}), out = Dev({kR, kH}), out_short = Dev({3, kH});
  ExpectChecked(
      "EmbeddingForward: id 5 at position 2 is outside [0, 5)",
      [&] { return backend_.EmbeddingForward(out_of_range, kT, wte, wpe, &out); }, &out,
      [&] { return backend_.EmbeddingForward(ids, kT, wte, wpe, &out); });
  ExpectChecked(
      "EmbeddingForward: bad seq_len 3 for 4 ids and 2 positions",
      [&] { return backend_.EmbeddingForward(ids, 3, wte, wpe, &out); }, &out,
      [&] { return backend_.EmbeddingForward(ids, kT, wte, wpe, &out); });
  ExpectChecked(
      "EmbeddingForward: out has shape [3,6]",
      [&] { return backend_.EmbeddingForward(ids, kT, wte, wpe, &out_short); }, &out_short,
      [&] { return backend_.EmbeddingForward(ids, kT, wte, wpe, &out); });
  Tensor dwte = Dev({kV, kH}), dwpe = Dev({kT, kH}), dwpe_narrow = Dev({kT, kH - 1});
  ExpectChecked(
      "EmbeddingBackward: dout has shape [3,6]",
      [&] { return backend_.EmbeddingBackward(ids, kT, out_short, false, &dwte, &dwpe); }, &dwte,
      [&] { return backend_.EmbeddingBackward(ids, kT, out, false, &dwte, &dwpe); });
  ExpectChecked(
      "EmbeddingBackward: dwpe has shape [2,5]",
      [&] { return backend_.EmbeddingBackward(ids, kT, out, false, &dwte, &dwpe_narrow); }, &dwte,
      [&] { return backend_.EmbeddingBackward(ids, kT, out, false, &dwte, &dwpe); });
  ExpectChecked(
      "EmbeddingBackward: id 5 at position 2",
      [&] { return backend_.EmbeddingBackward(out_of_range, kT, out, false, &dwte, &dwpe); }, &dwte,
      [&] { return backend_.EmbeddingBackward(ids, kT, out, false, &dwte, &dwpe); });
}

TEST_F(BackendChecksTest, LayerNormAndGelu) {
  Tensor x = Dev({kR, kH}), y = Dev({kR, kH}), gamma = Dev({kH}), beta = Dev({kH});
  Tensor mean = Dev({kR}), rstd = Dev({kR}), short_rows = Dev({kR - 1}), short_h = Dev({kH - 1});
  Tensor narrow = Dev({kR, kH - 1});
  ExpectChecked(
      "LayerNormForward: gamma has 5 elements, want 6",
      [&] { return backend_.LayerNormForward(x, short_h, beta, &y, &mean, &rstd); }, &y,
      [&] { return backend_.LayerNormForward(x, gamma, beta, &y, &mean, &rstd); });
  ExpectChecked(
      "LayerNormForward: mean has 3 elements, want 4",
      [&] { return backend_.LayerNormForward(x, gamma, beta, &y, &short_rows, &rstd); }, &y,
      [&] { return backend_.LayerNormForward(x, gamma, beta, &y, &mean, &rstd); });
  Tensor dx = Dev({kR, kH});
  ExpectChecked(
      "LayerNormBackwardInput: dx has shape [4,5]",
      [&] { return backend_.LayerNormBackwardInput(y, x, gamma, mean, rstd, &narrow); }, &narrow,
      [&] { return backend_.LayerNormBackwardInput(y, x, gamma, mean, rstd, &dx); });
  ExpectChecked(
      "LayerNormBackwardInput: rstd has 3 elements, want 4",
      [&] { return backend_.LayerNormBackwardInput(y, x, gamma, mean, short_rows, &dx); }, &dx,
      [&] { return backend_.LayerNormBackwardInput(y, x, gamma, mean, rstd, &dx); });
  ExpectChecked(
      "LayerNormBackwardInput: residual has shape [4,5]",
      [&] { return backend_.LayerNormBackwardInput(y, x, gamma, mean, rstd, &dx, &narrow); }, &dx,
      [&] { return backend_.LayerNormBackwardInput(y, x, gamma, mean, rstd, &dx, &y); });
  Tensor dgamma = Dev({kH}), dbeta = Dev({kH});
  ExpectChecked(
      "LayerNormBackwardWeight: dbeta has 5 elements, want 6",
      [&] { return backend_.LayerNormBackwardWeight(y, x, mean, rstd, false, &dgamma, &short_h); },
      &dgamma,
      [&] { return backend_.LayerNormBackwardWeight(y, x, mean, rstd, false, &dgamma, &dbeta); });
  ExpectChecked(
      "LayerNormBackwardWeight: dy has shape [4,5]",
      [&] {
        return backend_.LayerNormBackwardWeight(narrow, x, mean, rstd, true, &dgamma, &dbeta);
      },
      &dgamma,
      [&] { return backend_.LayerNormBackwardWeight(y, x, mean, rstd, true, &dgamma, &dbeta); });
  Tensor g = Dev({kR, kH});
  ExpectChecked(
      "GeluForward: y has 20 elements, want 24", [&] { return backend_.GeluForward(x, &narrow); },
      &narrow, [&] { return backend_.GeluForward(x, &g); });
  ExpectChecked(
      "GeluBackward: dy has 20 elements, want 24",
      [&] { return backend_.GeluBackward(narrow, x, &g); }, &g,
      [&] { return backend_.GeluBackward(y, x, &g); });
}

TEST_F(BackendChecksTest, Attention) {
  Tensor qkv = Dev({kR, 3 * kH}), out = Dev({kR, kH}), out_narrow = Dev({kR, kH - 1});
  ExpectChecked(
      "AttentionForward: bad batch/seq_len/heads 2/2/4 for qkv [4,18]",
      [&] { return backend_.AttentionForward(qkv, kBatch, kT, 4, &out); }, &out,
      [&] { return backend_.AttentionForward(qkv, kBatch, kT, kHeads, &out); });
  ExpectChecked(
      "AttentionForward: qkv has shape [4,18], want [6,-1]",
      [&] { return backend_.AttentionForward(qkv, 3, kT, kHeads, &out); }, &out,
      [&] { return backend_.AttentionForward(qkv, kBatch, kT, kHeads, &out); });
  ExpectChecked(
      "AttentionForward: out has shape [4,5]",
      [&] { return backend_.AttentionForward(qkv, kBatch, kT, kHeads, &out_narrow); },
      &out_narrow, [&] { return backend_.AttentionForward(qkv, kBatch, kT, kHeads, &out); });
  Tensor dqkv = Dev({kR, 3 * kH}), dqkv_narrow = Dev({kR, 3 * kH - 1});
  ExpectChecked(
      "AttentionBackward: dout has shape [4,5]",
      [&] { return backend_.AttentionBackward(out_narrow, qkv, kBatch, kT, kHeads, &dqkv); },
      &dqkv, [&] { return backend_.AttentionBackward(out, qkv, kBatch, kT, kHeads, &dqkv); });
  ExpectChecked(
      "AttentionBackward: dqkv has shape [4,17]",
      [&] { return backend_.AttentionBackward(out, qkv, kBatch, kT, kHeads, &dqkv_narrow); },
      &dqkv_narrow,
      [&] { return backend_.AttentionBackward(out, qkv, kBatch, kT, kHeads, &dqkv); });
}

TEST_F(BackendChecksTest, CrossEntropyAndAdamW) {
  Tensor logits = Dev({kR, kV}), probs = Dev({kR, kV}), narrow = Dev({kR, kV - 1});
  std::vector<int32_t> targets = {0, kIgnoreTarget, 4, 1};
  std::vector<int32_t> three = {0, 1, 2};
  std::vector<int32_t> out_of_range = {0, 1, kV, 1};
  ExpectChecked(
      "CrossEntropyForward: 3 targets for 4 rows",
      [&] { return backend_.CrossEntropyForward(logits, three, &probs).status(); }, &probs,
      [&] { return backend_.CrossEntropyForward(logits, targets, &probs).status(); });
  ExpectChecked(
      "CrossEntropyForward: id 5 at position 2 is outside [0, 5)",
      [&] { return backend_.CrossEntropyForward(logits, out_of_range, &probs).status(); }, &probs,
      [&] { return backend_.CrossEntropyForward(logits, targets, &probs).status(); });
  ExpectChecked(
      "CrossEntropyForward: probs has shape [4,4]",
      [&] { return backend_.CrossEntropyForward(logits, targets, &narrow).status(); }, &narrow,
      [&] { return backend_.CrossEntropyForward(logits, targets, &probs).status(); });
  Tensor dlogits = Dev({kR, kV});
  ExpectChecked(
      "CrossEntropyBackward: dlogits has shape [4,4]",
      [&] { return backend_.CrossEntropyBackward(probs, targets, 1.0f, &narrow); }, &narrow,
      [&] { return backend_.CrossEntropyBackward(probs, targets, 1.0f, &dlogits); });
  ExpectChecked(
      "CrossEntropyBackward: 3 targets for 4 rows",
      [&] { return backend_.CrossEntropyBackward(probs, three, 1.0f, &dlogits); }, &dlogits,
      [&] { return backend_.CrossEntropyBackward(probs, targets, 1.0f, &dlogits); });

  Tensor grad = Dev({kH}), param = Dev({kH}), m = Dev({kH}), v = Dev({kH}), v_short = Dev({3});
  ExpectChecked(
      "AdamWUpdate: step must be >= 1, got 0",
      [&] { return backend_.AdamWUpdate({}, 0, grad, &param, &m, &v); }, &param,
      [&] { return backend_.AdamWUpdate({}, 1, grad, &param, &m, &v); });
  param = Dev({kH});
  ExpectChecked(
      "AdamWUpdate: v has 3 elements, want 6",
      [&] { return backend_.AdamWUpdate({}, 2, grad, &param, &m, &v_short); }, &param,
      [&] { return backend_.AdamWUpdate({}, 2, grad, &param, &m, &v); });
}

TEST_F(BackendChecksTest, AllFiniteTakesDeviceTensorsOnly) {
  Tensor dev = Dev({kH}), host = Host({kH}), none;
  const absl::Status on_host = backend_.AllFinite({&dev, &host}).status();
  EXPECT_EQ(on_host.code(), absl::StatusCode::kInvalidArgument) << on_host;
  EXPECT_THAT(std::string(on_host.message()), HasSubstr("AllFinite: tensor is a host tensor"));
  const absl::Status empty = backend_.AllFinite({&dev, &none}).status();
  EXPECT_THAT(std::string(empty.message()), HasSubstr("AllFinite: tensor is empty"));
  const absl::Status null = backend_.AllFinite({nullptr}).status();
  EXPECT_THAT(std::string(null.message()), HasSubstr("AllFinite: a tensor is null"));
  EXPECT_TRUE(backend_.AllFinite({&dev}).ok());
  EXPECT_THAT(std::string(backend_.SumOfSquares(host).status().message()),
              HasSubstr("SumOfSquares: tensor is a host tensor"));
  EXPECT_THAT(std::string(backend_.Scale(2.0f, &host).message()),
              HasSubstr("Scale: tensor is a host tensor"));
  EXPECT_THAT(std::string(backend_.Scale(2.0f, nullptr).message()),
              HasSubstr("Scale: the tensor is null"));
  EXPECT_TRUE(backend_.SumOfSquares(dev).ok());
}

}  // namespace
}  // namespace pipetrain::kernels
