// Chunk checkpoints: a save/load round trip restores values and AdamW moments bitwise (and
// training continues bitwise like the original); truncated, bit-flipped and foreign files are
// rejected with an error naming the file, leaving the chunk untouched; a write killed mid-way
// leaves only a temp file that no loader or directory scan ever picks up. The manifest names only
// complete checkpoints and detects corruption; pruning keeps the newest N up to the manifest.
#include "model/checkpoint_layout.h"
#include "worker/model/chunk_checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernels/cpu/cpu_backend.h"
#include "tests/model/model_test_util.h"

namespace pipetrain::model {
namespace {

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/ckpt-XXXXXX";
  char* d = ::mkdtemp(tmpl.data());
  EXPECT_NE(d, nullptr);
  return tmpl;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Full state (value, m, v) of every parameter, in parameters() order.
std::vector<std::vector<float>> State(GptChunk& chunk) {
  std::vector<std::vector<float>> out;
  for (Parameter* p : chunk.parameters()) {
    for (const kernels::Tensor* t : {&p->value, &p->adam_m, &p->adam_v}) {
      out.push_back(*chunk.backend()->ToVector(*t));
    }
  }
  return out;
}

bool BitwiseEqual(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

// One training step (2 microbatches) on a chunk that holds the whole model.
void TrainStep(GptChunk& chunk, int step) {
  ASSERT_TRUE(chunk.ZeroGrad().ok());
  const GptConfig& c = chunk.config();
  for (int mb = 0; mb < 2; ++mb) {
    std::vector<int32_t> tokens = testing::RandomTokens(2 * c.seq_len, c.vocab, 100 * step + mb);
    std::vector<int32_t> targets = testing::RandomTokens(2 * c.seq_len, c.vocab, 7 + step + mb);
    ForwardInput in;
    in.tokens = tokens;
    in.targets = targets;
    in.loss_scale = 0.5f;
    ASSERT_TRUE(chunk.Forward(mb, std::move(in)).ok());
    ASSERT_TRUE(chunk.Backward(mb, kernels::Tensor()).ok());
  }
  const kernels::AdamWConfig adam{
      .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
  ASSERT_TRUE(chunk.OptimizerStep(adam, step + 1).ok());
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    auto chunk = GptChunk::Create(&backend_, config_, WholeModel(config_));
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    chunk_ = std::move(*chunk);
    for (int step = 0; step < 2; ++step) TrainStep(*chunk_, step);
    path_ = StageCheckpointPath(dir_, 2, 0);
    ASSERT_TRUE(SaveChunkCheckpoint(*chunk_, 2, path_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<GptChunk> Fresh(uint64_t seed = 99) {
    ChunkOptions options;
    options.seed = seed;
    auto chunk = GptChunk::Create(&backend_, config_, WholeModel(config_), options);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    return std::move(*chunk);
  }

  kernels::CpuBackend backend_;
  GptConfig config_ = testing::TinyConfig(2);
  std::string dir_;
  std::string path_;
  std::unique_ptr<GptChunk> chunk_;
};

TEST_F(CheckpointTest, RoundTripIsBitwiseAndTrainingContinuesIdentically) {
  auto fresh = Fresh();
  ASSERT_FALSE(BitwiseEqual(State(*fresh), State(*chunk_)));
  auto step = LoadChunkCheckpoint(path_, *fresh);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 2);
  EXPECT_TRUE(BitwiseEqual(State(*fresh), State(*chunk_)));
  // Moments are really there: continuing both gives bitwise the same weights.
  TrainStep(*chunk_, 2);
  TrainStep(*fresh, 2);
  EXPECT_TRUE(BitwiseEqual(State(*fresh), State(*chunk_)));
  // No temp file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(CheckpointStepDir(dir_, 2))) {
    ++files;
    EXPECT_EQ(e.path().filename(), "stage-0.ckpt");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(CheckpointTest, TruncatedFileIsRejected) {
  const std::string data = ReadAll(path_);
  auto fresh = Fresh();
  const auto before = State(*fresh);
  for (size_t len : {size_t{0}, size_t{5}, size_t{40}, data.size() / 2, data.size() - 1}) {
    const std::string bad = dir_ + "/truncated.ckpt";
    WriteAll(bad, data.substr(0, len));
    auto r = LoadChunkCheckpoint(bad, *fresh);
    ASSERT_FALSE(r.ok()) << "length " << len;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status();
  }
  EXPECT_TRUE(BitwiseEqual(State(*fresh), before)) << "a rejected file changed the chunk";
}

TEST_F(CheckpointTest, BitFlipIsRejected) {
  const std::string data = ReadAll(path_);
  auto fresh = Fresh();
  const auto before = State(*fresh);
  for (size_t pos : {size_t{20}, data.size() / 2, data.size() - 30}) {
    std::string bad = data;
    bad[pos] ^= 0x10;
    const std::string bad_path = dir_ + "/flipped.ckpt";
    WriteAll(bad_path, bad);
    auto r = LoadChunkCheckpoint(bad_path, *fresh);
    ASSERT_FALSE(r.ok()) << "byte " << pos;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_NE(r.status().message().find(bad_path), std::string::npos) << r.status();
  }
  EXPECT_TRUE(BitwiseEqual(State(*fresh), before));
}

TEST_F(CheckpointTest, OtherModelOrChunkIsRejected) {
  GptConfig wider = config_;
  wider.hidden = 32;
  auto other = GptChunk::Create(&backend_, wider, WholeModel(wider));
  ASSERT_TRUE(other.ok());
  auto r = LoadChunkCheckpoint(path_, **other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find(path_), std::string::npos) << r.status();

  auto specs = SplitEvenly(config_, 2);
  ASSERT_TRUE(specs.ok());
  auto half = GptChunk::Create(&backend_, config_, (*specs)[0]);
  ASSERT_TRUE(half.ok());
  r = LoadChunkCheckpoint(path_, **half);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();

  r = LoadChunkCheckpoint(dir_ + "/missing.ckpt", *Fresh());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

TEST_F(CheckpointTest, WriteKilledMidwayIsNeverPickedUp) {
  // A complete checkpoint of step 2 exists. A newer one (step 3) is cut off half-way.
  TrainStep(*chunk_, 2);
  const std::string step3 = StageCheckpointPath(dir_, 3, 0);
  CheckpointWriteOptions abandon;
  abandon.abandon_after_bytes = 500;
  absl::Status s = SaveChunkCheckpoint(*chunk_, 3, step3, abandon);
  ASSERT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_FALSE(std::filesystem::exists(step3));
  int temps = 0;
  for (const auto& e : std::filesystem::directory_iterator(CheckpointStepDir(dir_, 3))) {
    ++temps;
    EXPECT_NE(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  EXPECT_EQ(temps, 1);
  EXPECT_EQ(LatestCompleteCheckpointStep(dir_, 1), 2);
  EXPECT_EQ(LoadChunkCheckpoint(step3, *Fresh()).status().code(), absl::StatusCode::kNotFound);

  // Overwriting the existing step-2 file and dying half-way keeps the old file intact.
  const std::string old = ReadAll(path_);
  ASSERT_EQ(SaveChunkCheckpoint(*chunk_, 3, path_, abandon).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ReadAll(path_), old);
  auto fresh = Fresh();
  auto step = LoadChunkCheckpoint(path_, *fresh);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 2);

  // Stages: a step directory missing a stage's file is not complete.
  EXPECT_EQ(LatestCompleteCheckpointStep(dir_, 2), std::nullopt);
  EXPECT_EQ(LatestCompleteCheckpointStep(dir_ + "/nonexistent", 1), std::nullopt);
}

TEST_F(CheckpointTest, ManifestNamesOnlyCompleteCheckpoints) {
  EXPECT_EQ(ReadCheckpointManifest(dir_).status().code(), absl::StatusCode::kNotFound);
  // step-2 has stage 0 only: complete for 1 stage, not for 2.
  absl::Status s = WriteCheckpointManifest(dir_, {2, 2});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("stage-1.ckpt"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(CheckpointManifestPath(dir_)));

  ASSERT_TRUE(WriteCheckpointManifest(dir_, {2, 1}).ok());
  auto m = ReadCheckpointManifest(dir_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->step, 2);
  EXPECT_EQ(m->num_stages, 1);

  std::string text = ReadAll(CheckpointManifestPath(dir_));
  text[text.find("step 2") + 5] = '4';  // a different step with the old checksum
  WriteAll(CheckpointManifestPath(dir_), text);
  EXPECT_EQ(ReadCheckpointManifest(dir_).status().code(), absl::StatusCode::kDataLoss);
  WriteAll(CheckpointManifestPath(dir_), text.substr(0, text.size() / 2));
  EXPECT_EQ(ReadCheckpointManifest(dir_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, PruneKeepsTheNewestCompleteUpToTheManifest) {
  for (int step : {4, 6, 8, 10, 12}) {
    ASSERT_TRUE(SaveChunkCheckpoint(*chunk_, step, StageCheckpointPath(dir_, step, 0)).ok());
  }
  // Without a manifest nothing is deleted.
  auto removed = PruneCheckpoints(dir_, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(removed->empty());
  // A killed writer's leftover at step 9 (below the manifest), and step 12 is newer than it.
  CheckpointWriteOptions abandon;
  abandon.abandon_after_bytes = 100;
  ASSERT_EQ(SaveChunkCheckpoint(*chunk_, 9, StageCheckpointPath(dir_, 9, 0), abandon).code(),
            absl::StatusCode::kAborted);
  ASSERT_TRUE(WriteCheckpointManifest(dir_, {10, 1}).ok());
  removed = PruneCheckpoints(dir_, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, (std::vector<int64_t>{2, 4, 6, 9}));
  for (int step : {8, 10, 12}) {
    EXPECT_TRUE(std::filesystem::exists(StageCheckpointPath(dir_, step, 0))) << step;
  }
  for (int step : {2, 4, 6, 9}) {
    EXPECT_FALSE(std::filesystem::exists(CheckpointStepDir(dir_, step))) << step;
  }
  // keep_last below 1 is a caller's mistake (the spec's default is applied before).
  EXPECT_EQ(PruneCheckpoints(dir_, 0).status().code(), absl::StatusCode::kInvalidArgument);
  removed = PruneCheckpoints(dir_, 3);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->empty());
  // The kept checkpoint still loads.
  auto fresh = Fresh();
  auto step = LoadChunkCheckpoint(StageCheckpointPath(dir_, 10, 0), *fresh);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 10);
}

}  // namespace
}  // namespace pipetrain::model
