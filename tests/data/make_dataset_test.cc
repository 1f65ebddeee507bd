// MakeDataset (worker/runtime/job_config.h) on the "tokens" and "text" sources: what a worker's
// Prepare answers for every kind of bad file: InvalidArgument naming the spec field and the file,
// and the problem; a FIFO or /dev/zero neither blocks nor is read. And a good `pipetrain data
// prepare`-style directory (train.bin, val.bin, meta.json) is accepted, its meta.json checked.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "tests/data/test_files.h"
#include "worker/data/addition_task.h"
#include "worker/data/text_dataset.h"
#include "worker/data/token_dataset.h"
#include "worker/runtime/job_config.h"

namespace pipetrain::worker {
namespace {

using ::pipetrain::testing::FreshDir;
using ::pipetrain::testing::MakeFifo;
using ::pipetrain::testing::WriteBytes;
using ::pipetrain::testing::WriteIds;

constexpr int kVocab = 50;
constexpr int kSeqLen = 8;

v1::JobSpec TokensSpec(const std::string& path, const std::string& dtype = "") {
  v1::JobSpec spec;
  spec.mutable_model()->set_vocab_size(kVocab);
  spec.mutable_model()->set_seq_len(kSeqLen);
  spec.mutable_training()->set_seed(3);
  spec.mutable_training()->mutable_data()->set_source("tokens");
  spec.mutable_training()->mutable_data()->set_path(path);
  spec.mutable_training()->mutable_data()->set_token_dtype(dtype);
  return spec;
}

std::vector<uint32_t> Ids(int n) {
  std::vector<uint32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = static_cast<uint32_t>(i % kVocab);
  return ids;
}

std::string Meta(const std::string& dtype, int vocab, int64_t train, int64_t val) {
  return "{\"format\": \"pipetrain-tokens-v1\", \"dtype\": \"" + dtype +
         "\", \"vocab_size\": " + std::to_string(vocab) +
         ", \"train_tokens\": " + std::to_string(train) +
         ", \"val_tokens\": " + std::to_string(val) + "}";
}

// The error a worker's Prepare would fail with: InvalidArgument, naming `field` and `file`.
void ExpectRefused(const v1::JobSpec& spec, const std::string& field, const std::string& file,
                   const std::string& problem) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<data::Dataset>> ds = MakeDataset(spec);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << file;
  ASSERT_FALSE(ds.ok()) << file;
  const std::string message(ds.status().message());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument) << message;
  EXPECT_EQ(message.rfind(field + ": ", 0), 0u) << "want the field first: " << message;
  EXPECT_NE(message.find(file), std::string::npos) << "want the file: " << message;
  EXPECT_NE(message.find(problem), std::string::npos) << "want \"" << problem << "\": " << message;
}

TEST(MakeDatasetTokensTest, OpensAFileWithTheDeclaredShape) {
  const std::string dir = FreshDir();
  auto ds = MakeDataset(TokensSpec(WriteIds(dir + "/t.bin", Ids(500), 2)));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->seq_len(), kSeqLen);
  EXPECT_EQ((*ds)->vocab_size(), kVocab);
  EXPECT_EQ((*ds)->name(), "tokens:" + dir + "/t.bin");
  auto u32 = MakeDataset(TokensSpec(WriteIds(dir + "/t32.bin", Ids(500), 4), "uint32"));
  ASSERT_TRUE(u32.ok()) << u32.status();
  // Same ids, either width: the same batches.
  EXPECT_EQ((*ds)->Get(5, 1, 3).tokens, (*u32)->Get(5, 1, 3).tokens);
}

TEST(MakeDatasetTokensTest, OpensAPreparedDirectoryAndChecksItsMeta) {
  const std::string dir = FreshDir();
  WriteIds(dir + "/train.bin", Ids(400), 2);
  WriteIds(dir + "/val.bin", Ids(40), 2);
  WriteBytes(dir + "/meta.json", Meta("uint16", kVocab, 400, 40));
  auto ds = MakeDataset(TokensSpec(dir));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->name(), "tokens:" + dir + "/train.bin");  // trained on train.bin only
  ASSERT_TRUE(MakeDataset(TokensSpec(dir + "/")).ok());

  // meta.json disagreeing with the spec or the files.
  WriteBytes(dir + "/meta.json", Meta("uint32", kVocab, 400, 40));
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/meta.json",
                "says the ids are uint32, the job reads uint16 (set training.data.token_dtype: "
                "uint32)");
  WriteBytes(dir + "/meta.json", Meta("uint16", kVocab + 1, 400, 40));
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/meta.json",
                "more than model.vocab_size (50)");
  WriteBytes(dir + "/meta.json", Meta("uint16", kVocab, 401, 40));
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/meta.json",
                "says train.bin holds 401 ids, it holds 400");
  WriteBytes(dir + "/meta.json", "{not json");
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/meta.json", "not a JSON object");
  WriteBytes(dir + "/meta.json", Meta("uint16", kVocab, 400, 40));

  // A bad val.bin fails the job too, naming it.
  std::vector<uint32_t> bad = Ids(40);
  bad[12] = kVocab;
  WriteIds(dir + "/val.bin", bad, 2);
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/val.bin",
                "1 of its 40 ids are >= model.vocab_size (50); the first, 50, is id number 12 "
                "(byte offset 24)");
  std::filesystem::remove(dir + "/val.bin");
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/meta.json",
                "says val.bin holds 40 ids, it holds 0");
  std::filesystem::remove(dir + "/meta.json");
  EXPECT_TRUE(MakeDataset(TokensSpec(dir)).ok());  // no meta.json, no val.bin: just train.bin
  std::filesystem::remove(dir + "/train.bin");
  ExpectRefused(TokensSpec(dir), "training.data.path", dir + "/train.bin", "no such file");
}

TEST(MakeDatasetTokensTest, EveryBadFileNamesTheFieldAndTheFile) {
  const std::string dir = FreshDir();
  std::vector<uint32_t> bad = Ids(300);
  bad[200] = 65535;
  bad[250] = kVocab;
  const struct {
    std::string path;
    std::string dtype;
    std::string problem;
  } cases[] = {
      {dir + "/missing.bin", "", "no such file"},
      {WriteBytes(dir + "/empty.bin", ""), "", "is empty"},
      {WriteBytes(dir + "/odd.bin", std::string(101, 'x')), "",
       "101 bytes, not a whole number of uint16 ids"},
      {WriteBytes(dir + "/odd32.bin", std::string(102, 'x')), "uint32",
       "102 bytes, not a whole number of uint32 ids"},
      {WriteIds(dir + "/short.bin", Ids(kSeqLen), 2), "",
       "has 8 ids; one window needs model.seq_len + 1 = 9"},
      {WriteIds(dir + "/vocab.bin", bad, 2), "",
       "2 of its 300 ids are >= model.vocab_size (50); the first, 65535, is id number 200 (byte "
       "offset 400)"},
      {MakeFifo(dir + "/fifo.bin"), "", "is a FIFO, not a regular file"},
      {"/dev/zero", "", "is a character device, not a regular file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    ExpectRefused(TokensSpec(c.path, c.dtype), "training.data.path", c.path, c.problem);
  }
  ExpectRefused(TokensSpec(dir + "/missing.bin", "int8"), "training.data.token_dtype", "int8",
                "is not one of: uint16, uint32");
}

TEST(MakeDatasetTextTest, RefusesNonRegularAndOversizedFiles) {
  const std::string dir = FreshDir();
  v1::JobSpec spec;
  spec.mutable_model()->set_seq_len(8);
  spec.mutable_training()->mutable_data()->set_source("text");
  auto text = [&](const std::string& path) {
    spec.mutable_training()->mutable_data()->set_path(path);
    return spec;
  };
  ASSERT_TRUE(MakeDataset(text(WriteBytes(dir + "/ok.txt", std::string(100, 'a')))).ok());
  ExpectRefused(text(MakeFifo(dir + "/fifo.txt")), "training.data.path", dir + "/fifo.txt",
                "is a FIFO, not a regular file");
  ExpectRefused(text("/dev/zero"), "training.data.path", "/dev/zero",
                "is a character device, not a regular file");
  ExpectRefused(text(dir), "training.data.path", dir, "is a directory, not a regular file");
  ExpectRefused(text(dir + "/none.txt"), "training.data.path", dir + "/none.txt", "no such file");
  ExpectRefused(text(WriteBytes(dir + "/tiny.txt", "abc")), "training.data.path", dir + "/tiny.txt",
                "has 3 bytes; need more than seq_len + 1 = 9");
  // One byte over the limit, sparse: refused from its size, before anything is read.
  const std::string big = dir + "/big.txt";
  const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, data::TextDataset::kMaxBytes + 1), 0);
  ::close(fd);
  ExpectRefused(text(big), "training.data.path", big,
                "has 1073741825 bytes, more than the limit of 1073741824 bytes");
  std::filesystem::remove(big);
}

}  // namespace
}  // namespace pipetrain::worker

// Validation data (docs/data.md, "Validation data"): with eval.interval_steps > 0 each source
// gives a held-out part that training never reads; without it, training reads everything, as
// before evaluation existed.
namespace pipetrain::worker {
namespace {

v1::JobSpec Evaluating(v1::JobSpec spec) {
  spec.mutable_eval()->set_interval_steps(5);
  return spec;
}

TEST(ValidationDataTest, TokensEvaluateOnValBinAndNeedOne) {
  const std::string dir = FreshDir();
  std::vector<uint32_t> val(40, 7);  // every validation id is 7; no training id is
  std::vector<uint32_t> train = Ids(400);
  for (uint32_t& id : train) id = id == 7 ? 8 : id;
  WriteIds(dir + "/train.bin", train, 2);
  WriteIds(dir + "/val.bin", val, 2);
  absl::StatusOr<JobData> data = OpenJobData(Evaluating(TokensSpec(dir)));
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->validation, nullptr);
  EXPECT_EQ(data->validation->name(), "tokens:" + dir + "/val.bin");
  for (int i = 0; i < 4; ++i) {
    for (int32_t id : data::ValidationMicrobatch(*data->validation, i, 3).tokens) EXPECT_EQ(id, 7);
    for (int32_t id : data->train->Get(i + 1, 0, 3).tokens) EXPECT_NE(id, 7);
  }
  EXPECT_EQ(OpenJobData(TokensSpec(dir)).value().validation, nullptr);  // no evaluation

  // Evaluation on data without val.bin: refused at Prepare, naming the fields.
  std::filesystem::remove(dir + "/val.bin");
  absl::StatusOr<JobData> none = OpenJobData(Evaluating(TokensSpec(dir)));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message().rfind("eval.interval_steps: 5 needs validation data", 0), 0u)
      << none.status();
  EXPECT_NE(none.status().message().find("has no val.bin"), std::string::npos) << none.status();
  const std::string file = WriteIds(dir + "/plain.bin", Ids(400), 2);
  EXPECT_FALSE(OpenJobData(Evaluating(TokensSpec(file))).ok());
}

TEST(ValidationDataTest, TextHoldsOutItsLastTenth) {
  const std::string dir = FreshDir();
  // 900 bytes of 'a', then 100 of 'b': the last tenth is exactly the b's.
  const std::string path = WriteBytes(dir + "/t.txt", std::string(900, 'a') + std::string(100, 'b'));
  v1::JobSpec spec;
  spec.mutable_model()->set_seq_len(kSeqLen);
  spec.mutable_training()->mutable_data()->set_source("text");
  spec.mutable_training()->mutable_data()->set_path(path);
  absl::StatusOr<JobData> data = OpenJobData(Evaluating(spec));
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->validation, nullptr);
  for (int i = 0; i < 50; ++i) {
    for (int32_t b : data::ValidationMicrobatch(*data->validation, i, 4).tokens) EXPECT_EQ(b, 'b');
    for (int32_t b : data->train->Get(i + 1, i % 3, 4).targets) EXPECT_EQ(b, 'a');
  }
  // Without evaluation the whole file trains, with the same windows as before the split existed.
  absl::StatusOr<JobData> all = OpenJobData(spec);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->validation, nullptr);
  auto whole = data::TextDataset::Open(path, kSeqLen, spec.training().seed());
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(all->train->Get(3, 1, 4).tokens, (*whole)->Get(3, 1, 4).tokens);

  // Too short to hold out one window: refused, naming the field, the file and the part.
  const std::string small = WriteBytes(dir + "/s.txt", std::string(60, 'x'));
  spec.mutable_training()->mutable_data()->set_path(small);
  absl::StatusOr<JobData> refused = OpenJobData(Evaluating(spec));
  ASSERT_FALSE(refused.ok());
  const std::string message(refused.status().message());
  EXPECT_EQ(message.rfind("training.data.path: " + small + ": its validation part", 0), 0u)
      << message;
  EXPECT_NE(message.find("has 6 of its 60 bytes; need more than seq_len + 1 = 9"),
            std::string::npos)
      << message;
  EXPECT_TRUE(OpenJobData(spec).ok());  // fine without evaluation
}

TEST(ValidationDataTest, AdditionHoldsOutATenthOfTheProblems) {
  v1::JobSpec spec;
  spec.mutable_training()->set_seed(5);
  absl::StatusOr<JobData> data = OpenJobData(Evaluating(spec));
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->validation, nullptr);
  const data::AdditionTask task(2, 5);
  auto operands = [](const data::Microbatch& mb, int s) {
    const int32_t* t = mb.tokens.data() + s * mb.seq_len;
    return std::pair<int, int>{t[0] * 10 + t[1], t[3] * 10 + t[4]};
  };
  int held_out = 0;
  for (int a = 0; a < 100; ++a) {
    for (int b = 0; b < 100; ++b) held_out += task.HeldOut(a, b) ? 1 : 0;
  }
  EXPECT_GT(held_out, 800);  // about a tenth of the 10000 problems
  EXPECT_LT(held_out, 1200);
  for (int step = 1; step <= 20; ++step) {
    const data::Microbatch train = data->train->Get(step, 0, 16);
    const data::Microbatch val = data::ValidationMicrobatch(*data->validation, step - 1, 16);
    for (int s = 0; s < 16; ++s) {
      const auto [ta, tb] = operands(train, s);
      EXPECT_FALSE(task.HeldOut(ta, tb)) << ta << "+" << tb << " is held out but trained on";
      EXPECT_FALSE(task.HeldOut(tb, ta));
      const auto [va, vb] = operands(val, s);
      EXPECT_TRUE(task.HeldOut(va, vb)) << va << "+" << vb << " is a training problem";
      EXPECT_EQ(val.targets[s * val.seq_len + 5], (va + vb) % 10);  // the answer's first digit
    }
  }
  // Without evaluation: every problem, the same batches as before the split existed.
  absl::StatusOr<JobData> all = OpenJobData(spec);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->train->Get(4, 2, 8).tokens, task.Get(4, 2, 8).tokens);
}

}  // namespace
}  // namespace pipetrain::worker
