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
