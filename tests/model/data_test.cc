// Data: the addition task's format and determinism, the byte-level text loader, scoring.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "worker/data/addition_task.h"
#include "worker/data/text_dataset.h"

namespace pipetrain::data {
namespace {

TEST(AdditionTaskTest, FormatIsAPlusBEqualsReversedSum) {
  AdditionTask task(3, 42);
  EXPECT_EQ(task.seq_len(), 11);
  EXPECT_EQ(task.vocab_size(), 12);
  const Microbatch mb = task.Get(5, 2, 8);
  ASSERT_EQ(mb.tokens.size(), 88u);
  for (int s = 0; s < 8; ++s) {
    const int32_t* t = mb.tokens.data() + s * 11;
    const int32_t* y = mb.targets.data() + s * 11;
    EXPECT_EQ(t[3], AdditionTask::kPlus);
    EXPECT_EQ(t[7], AdditionTask::kEquals);
    const int a = t[0] * 100 + t[1] * 10 + t[2], b = t[4] * 100 + t[5] * 10 + t[6];
    // Answer digits (least significant first) are the targets at positions 7..10.
    int c = 0, scale = 1;
    for (int i = 7; i <= 10; ++i, scale *= 10) c += y[i] * scale;
    EXPECT_EQ(c, a + b);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(y[i], -1);
    for (int i = 8; i <= 10; ++i) EXPECT_EQ(t[i], y[i - 1]);  // teacher forcing
  }
}

TEST(AdditionTaskTest, DeterministicPerStepAndMicrobatch) {
  AdditionTask a(3, 42), b(3, 42), c(3, 43);
  EXPECT_EQ(a.Get(7, 1, 4).tokens, b.Get(7, 1, 4).tokens);
  EXPECT_NE(a.Get(7, 1, 4).tokens, a.Get(7, 2, 4).tokens);
  EXPECT_NE(a.Get(7, 1, 4).tokens, a.Get(8, 1, 4).tokens);
  EXPECT_NE(a.Get(7, 1, 4).tokens, c.Get(7, 1, 4).tokens);
}

TEST(TextDatasetTest, ByteWindowsWithNextByteTargets) {
  const std::string path = ::testing::TempDir() + "/pipetrain_text.txt";
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 1000; ++i) out << static_cast<char>('a' + i % 26);
  }
  auto ds = TextDataset::Open(path, 16, 3);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->vocab_size(), 256);
  const Microbatch mb = (*ds)->Get(0, 0, 4);
  ASSERT_EQ(mb.tokens.size(), 64u);
  for (size_t i = 0; i < mb.tokens.size(); ++i) {
    EXPECT_EQ(mb.targets[i], 'a' + (mb.tokens[i] - 'a' + 1) % 26);
  }
  EXPECT_EQ((*ds)->Get(3, 1, 4).tokens, (*ds)->Get(3, 1, 4).tokens);
  EXPECT_EQ(TextDataset::Open(path + ".missing", 16, 3).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(TextDataset::Open(path, 5000, 3).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

TEST(ScoreTest, TokenAndExactMatch) {
  Microbatch mb{2, 3, {0, 0, 0, 0, 0, 0}, {-1, 4, 5, -1, 6, 7}};
  const Accuracy a = Score(mb, {9, 4, 5, 9, 6, 1});
  EXPECT_EQ(a.scored_tokens, 4);
  EXPECT_EQ(a.correct_tokens, 3);
  EXPECT_EQ(a.exact_sequences, 1);
  EXPECT_DOUBLE_EQ(a.exact_match(), 0.5);
}

}  // namespace
}  // namespace pipetrain::data
