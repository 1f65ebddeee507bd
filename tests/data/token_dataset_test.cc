// TokenDataset: windows of seq_len + 1 ids read little-endian from uint16 and uint32 files,
// deterministic per (seed, step, microbatch, sequence), always inside the file; and the checks
// Open makes on the file. MappedFile's refusals of non-regular files.
#include "worker/data/token_dataset.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>

#include "common/mapped_file.h"
#include "tests/data/test_files.h"

namespace pipetrain::data {
namespace {

using ::pipetrain::testing::FreshDir;
using ::pipetrain::testing::MakeFifo;
using ::pipetrain::testing::WriteBytes;
using ::pipetrain::testing::WriteIds;

TokenDataset::Options Opts(model::TokenDtype dtype, int seq_len, int vocab, uint64_t seed = 7) {
  TokenDataset::Options o;
  o.dtype = dtype;
  o.seq_len = seq_len;
  o.vocab_size = vocab;
  o.seed = seed;
  return o;
}

bool Has(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST(TokenDatasetTest, ReadsLittleEndianIdsOfEitherWidth) {
  const std::string dir = FreshDir();
  // 0x1234 is bytes 34 12; 0x00ABCDEF is bytes EF CD AB 00.
  WriteBytes(dir + "/u16.bin", std::string("\x34\x12\x01\x00\xff\xff", 6));
  auto u16 = TokenDataset::Open(dir + "/u16.bin", Opts(model::TokenDtype::kUint16, 2, 65536));
  ASSERT_TRUE(u16.ok()) << u16.status();
  EXPECT_EQ((*u16)->num_tokens(), 3);
  EXPECT_EQ((*u16)->token(0), 0x1234);
  EXPECT_EQ((*u16)->token(1), 1);
  EXPECT_EQ((*u16)->token(2), 0xFFFF);
  WriteBytes(dir + "/u32.bin", std::string("\xef\xcd\xab\x00\x02\x00\x00\x00", 8));
  auto u32 = TokenDataset::Open(dir + "/u32.bin", Opts(model::TokenDtype::kUint32, 1, 1 << 24));
  ASSERT_TRUE(u32.ok()) << u32.status();
  EXPECT_EQ((*u32)->num_tokens(), 2);
  EXPECT_EQ((*u32)->token(0), 0xABCDEF);
  EXPECT_EQ((*u32)->token(1), 2);
}

// Every sequence is a run of the file: targets are the inputs shifted by one.
void ExpectWindowsOfTheFile(const TokenDataset& ds, const std::vector<uint32_t>& ids, int64_t step,
                            int mb, int size) {
  std::map<uint32_t, int64_t> where;  // ids are unique in these files
  for (size_t i = 0; i < ids.size(); ++i) where[ids[i]] = static_cast<int64_t>(i);
  const Microbatch batch = ds.Get(step, mb, size);
  ASSERT_EQ(batch.tokens.size(), static_cast<size_t>(size * ds.seq_len()));
  ASSERT_EQ(batch.targets.size(), batch.tokens.size());
  for (int s = 0; s < size; ++s) {
    const int64_t off = where.at(static_cast<uint32_t>(batch.tokens[s * ds.seq_len()]));
    ASSERT_LE(off + ds.seq_len(), static_cast<int64_t>(ids.size()) - 1) << "window past the end";
    for (int t = 0; t < ds.seq_len(); ++t) {
      EXPECT_EQ(batch.tokens[s * ds.seq_len() + t], static_cast<int32_t>(ids[off + t]));
      EXPECT_EQ(batch.targets[s * ds.seq_len() + t], static_cast<int32_t>(ids[off + t + 1]));
    }
  }
}

TEST(TokenDatasetTest, WindowsAreRunsOfTheFileForBothWidths) {
  const std::string dir = FreshDir();
  std::vector<uint32_t> u16(5000), u32(5000);
  for (uint32_t i = 0; i < 5000; ++i) {
    u16[i] = (i * 257) & 0xFFFF;  // unique, high bytes set
    u32[i] = 70000 + 3 * i;       // unique, above 16 bits
  }
  std::set<uint32_t> distinct(u32.begin(), u32.end());
  ASSERT_EQ(distinct.size(), u32.size());
  auto a = TokenDataset::Open(WriteIds(dir + "/a.bin", u16, 2),
                              Opts(model::TokenDtype::kUint16, 16, 65536));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = TokenDataset::Open(WriteIds(dir + "/b.bin", u32, 4),
                              Opts(model::TokenDtype::kUint32, 32, 1 << 20));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->vocab_size(), 65536);
  EXPECT_EQ((*b)->seq_len(), 32);
  for (int64_t step : {0, 1, 17, 100000, -1}) {
    ExpectWindowsOfTheFile(**a, u16, step, 3, 4);
    ExpectWindowsOfTheFile(**b, u32, step, 0, 8);
  }
}

TEST(TokenDatasetTest, DeterministicPerSeedStepMicrobatchAndSequence) {
  const std::string dir = FreshDir();
  std::vector<uint32_t> ids(20000);
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i % 1000;
  const std::string path = WriteIds(dir + "/t.bin", ids, 2);
  auto a = TokenDataset::Open(path, Opts(model::TokenDtype::kUint16, 8, 1000, 5));
  auto again = TokenDataset::Open(path, Opts(model::TokenDtype::kUint16, 8, 1000, 5));
  auto other_seed = TokenDataset::Open(path, Opts(model::TokenDtype::kUint16, 8, 1000, 6));
  ASSERT_TRUE(a.ok() && again.ok() && other_seed.ok());
  // A second process (another worker, the reference trainer, a resumed run) sees the same batch.
  EXPECT_EQ((*a)->Get(9, 2, 4).tokens, (*again)->Get(9, 2, 4).tokens);
  EXPECT_EQ((*a)->Get(9, 2, 4).targets, (*again)->Get(9, 2, 4).targets);
  EXPECT_NE((*a)->Get(9, 2, 4).tokens, (*a)->Get(10, 2, 4).tokens);
  EXPECT_NE((*a)->Get(9, 2, 4).tokens, (*a)->Get(9, 3, 4).tokens);
  EXPECT_NE((*a)->Get(9, 2, 4).tokens, (*other_seed)->Get(9, 2, 4).tokens);
  // Sequence s of a microbatch does not depend on how many sequences were asked for.
  const Microbatch two = (*a)->Get(4, 1, 2), four = (*a)->Get(4, 1, 4);
  EXPECT_TRUE(std::equal(two.tokens.begin(), two.tokens.end(), four.tokens.begin()));
}

TEST(TokenDatasetTest, EveryWindowStartIsDrawnAndNoneRunsPastTheEnd) {
  const std::string dir = FreshDir();
  constexpr int kSeqLen = 6;
  // seq_len + 3 ids: window starts 0, 1 and 2 only.
  std::vector<uint32_t> ids(kSeqLen + 3);
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
  auto ds = TokenDataset::Open(WriteIds(dir + "/w.bin", ids, 4),
                               Opts(model::TokenDtype::kUint32, kSeqLen, 100));
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::set<int32_t> starts;
  for (int step = 0; step < 200; ++step) {
    const Microbatch mb = (*ds)->Get(step, 0, 4);
    for (int s = 0; s < 4; ++s) {
      starts.insert(mb.tokens[s * kSeqLen]);
      EXPECT_LE(mb.targets[s * kSeqLen + kSeqLen - 1], static_cast<int32_t>(ids.size()) - 1);
    }
  }
  EXPECT_EQ(starts, (std::set<int32_t>{0, 1, 2}));
  // Exactly one window: always the whole file.
  ids.resize(kSeqLen + 1);
  auto one = TokenDataset::Open(WriteIds(dir + "/one.bin", ids, 4),
                                Opts(model::TokenDtype::kUint32, kSeqLen, 100));
  ASSERT_TRUE(one.ok()) << one.status();
  for (int step = 0; step < 20; ++step) EXPECT_EQ((*one)->Get(step, 1, 1).tokens[0], 0);
}

TEST(TokenDatasetTest, BadFilesSayWhatIsWrong) {
  const std::string dir = FreshDir();
  const auto u16 = Opts(model::TokenDtype::kUint16, 4, 100);
  struct Case {
    std::string path;
    TokenDataset::Options options;
    absl::StatusCode code;
    std::string says;
  };
  std::vector<uint32_t> ok_ids(10, 5), bad_ids(10, 5);
  bad_ids[3] = 100;
  bad_ids[7] = 4000;
  const std::vector<Case> cases = {
      {dir + "/missing.bin", u16, absl::StatusCode::kNotFound, "no such file"},
      {dir, u16, absl::StatusCode::kInvalidArgument, "is a directory, not a regular file"},
      {WriteBytes(dir + "/empty.bin", ""), u16, absl::StatusCode::kInvalidArgument, "is empty"},
      {WriteBytes(dir + "/odd.bin", std::string(21, '\0')), u16, absl::StatusCode::kInvalidArgument,
       "21 bytes, not a whole number of uint16 ids"},
      {WriteBytes(dir + "/six.bin", std::string(6, '\0')), Opts(model::TokenDtype::kUint32, 1, 100),
       absl::StatusCode::kInvalidArgument, "6 bytes, not a whole number of uint32 ids"},
      {WriteIds(dir + "/short.bin", {1, 2, 3, 4}, 2), u16, absl::StatusCode::kInvalidArgument,
       "has 4 ids; one window needs model.seq_len + 1 = 5"},
      {WriteIds(dir + "/bad.bin", bad_ids, 2), u16, absl::StatusCode::kInvalidArgument,
       "2 of its 10 ids are >= model.vocab_size (100); the first, 100, is id number 3 (byte "
       "offset 6)"},
      {WriteIds(dir + "/bad32.bin", bad_ids, 4), Opts(model::TokenDtype::kUint32, 4, 100),
       absl::StatusCode::kInvalidArgument, "is id number 3 (byte offset 12)"},
      {WriteIds(dir + "/fine.bin", ok_ids, 2), Opts(model::TokenDtype::kUint16, 0, 100),
       absl::StatusCode::kInvalidArgument, "must be >= 1"},
  };
  for (const Case& c : cases) {
    auto ds = TokenDataset::Open(c.path, c.options);
    EXPECT_EQ(ds.status().code(), c.code) << c.path << ": " << ds.status();
    EXPECT_TRUE(Has(ds.status(), c.path)) << ds.status();
    EXPECT_TRUE(Has(ds.status(), c.says)) << "want \"" << c.says << "\" in " << ds.status();
  }
  EXPECT_TRUE(TokenDataset::Open(dir + "/fine.bin", u16).ok());
}

// Neither a FIFO with no writer nor an endless device may block or be read.
TEST(TokenDatasetTest, FifoAndDevZeroAreRefusedAtOnce) {
  const std::string fifo = MakeFifo(FreshDir() + "/fifo.bin");
  const auto start = std::chrono::steady_clock::now();
  auto ds = TokenDataset::Open(fifo, Opts(model::TokenDtype::kUint16, 4, 100));
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(ds.status(), fifo + ": is a FIFO, not a regular file")) << ds.status();
  auto zero = TokenDataset::Open("/dev/zero", Opts(model::TokenDtype::kUint16, 4, 100));
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(zero.status(), "/dev/zero: is a character device, not a regular file"))
      << zero.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(MappedFileTest, MapsRegularFilesAndReadsBounded) {
  const std::string dir = FreshDir();
  const std::string path = WriteBytes(dir + "/f", "hello");
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), "hello");
  MappedFile moved = *std::move(f);
  EXPECT_EQ(moved.size(), 5);
  EXPECT_EQ(MappedFile::Open(path, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(MappedFile::Open(path, 4).status(), "has 5 bytes, more than the limit of 4"));
  EXPECT_EQ(*ReadRegularFile(path, 5), "hello");
  EXPECT_EQ(*ReadRegularFile(WriteBytes(dir + "/e", ""), 5), "");
  EXPECT_EQ(ReadRegularFile(path, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRegularFile("/dev/zero", 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(ReadRegularFile(MakeFifo(dir + "/p"), 100).status(), "is a FIFO"));
  if (::geteuid() != 0) {  // root reads anything
    ::chmod(path.c_str(), 0);
    EXPECT_EQ(MappedFile::Open(path).status().code(), absl::StatusCode::kPermissionDenied);
  }
}

}  // namespace
}  // namespace pipetrain::data
