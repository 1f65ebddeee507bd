// Standard checkpoints out and in (docs/export.md): the safetensors writer and reader (round
// trip, and every malformed file refused with what is wrong); `pipetrain export`'s gathering of
// all stage files of a checkpoint step into one file with GPT-2 names (bitwise the chunks'
// values, the LM head transposed, the model's config in the metadata), its choice of step and
// its errors for a missing, incomplete or corrupted checkpoint; and `model.init_from`'s loader,
// which puts the exported values back into chunks of any other split bitwise and names the
// tensor and both shapes when the model does not match.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "client/model_export.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/checkpoint_layout.h"
#include "model/exported_model.h"
#include "model/safetensors.h"
#include "worker/data/addition_task.h"
#include "worker/model/chunk_checkpoint.h"
#include "worker/model/exported_weights.h"
#include "worker/model/gpt_chunk.h"

namespace pipetrain {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/export-XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// A file with a hand-written header (8-byte length, JSON, data bytes).
void WriteRaw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out.append(data_bytes, '\0');
  WriteAll(path, out);
}

TEST(Safetensors, RoundTripKeepsValuesShapesAndMetadata) {
  const std::string path = TempDir() + "/t.safetensors";
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  std::vector<float> b = {42.0f};
  ASSERT_TRUE(model::WriteSafetensors(
                  path, {{"k", "v"}, {"n_layer", "3"}},
                  {{"a", {2, 3}, [&]() -> absl::StatusOr<std::vector<float>> { return a; }},
                   {"b", {1}, [&]() -> absl::StatusOr<std::vector<float>> { return b; }}})
                  .ok());
  const std::string bytes = ReadAll(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ((8 + header_len) % 8, 0u) << "the data starts 8-byte aligned";
  EXPECT_EQ(bytes.size(), 8 + header_len + 7 * 4);
  auto file = model::SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("k"), "v");
  EXPECT_EQ(file->metadata().at("n_layer"), "3");
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "a");
  EXPECT_EQ(file->Find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file->Values(*file->Find("a")), a);
  EXPECT_EQ(file->Values(*file->Find("b")), b);
  EXPECT_EQ(file->Find("c"), nullptr);
}

TEST(Safetensors, WriterRefusesWrongSizesAndNames) {
  const std::string dir = TempDir();
  auto values = [](size_t n) {
    return [n]() -> absl::StatusOr<std::vector<float>> { return std::vector<float>(n); };
  };
  absl::Status s = model::WriteSafetensors(dir + "/x.safetensors", {}, {{"a", {2, 2}, values(3)}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor a has 3 values, its shape [2, 2] needs 4"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.safetensors")) << "nothing half-written stays";
  s = model::WriteSafetensors(dir + "/y.safetensors", {},
                              {{"a", {1}, values(1)}, {"a", {1}, values(1)}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"a\" is empty, reserved or repeated"));
}

TEST(Safetensors, ReaderRefusesMalformedFilesSayingWhy) {
  const std::string dir = TempDir();
  const std::string p = dir + "/bad.safetensors";
  auto error = [&]() { return std::string(model::SafetensorsFile::Open(p).status().message()); };
  WriteAll(p, "abc");
  EXPECT_THAT(error(), HasSubstr("only 3 bytes"));
  WriteRaw(p, "{}", 0);
  WriteAll(p, std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}");
  EXPECT_THAT(error(), HasSubstr("header length 4294967295 does not fit"));
  WriteRaw(p, "[1, 2]", 0);
  EXPECT_THAT(error(), HasSubstr("not a JSON object"));
  WriteRaw(p, R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
  EXPECT_THAT(error(), HasSubstr("tensor a has dtype \"F16\"; only F32 is supported"));
  WriteRaw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4);
  EXPECT_THAT(error(), HasSubstr("shape [2] needs 8 bytes, data_offsets give 4"));
  WriteRaw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);
  EXPECT_THAT(error(), HasSubstr("lie outside the 4 data bytes"));
  WriteRaw(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  EXPECT_THAT(error(), HasSubstr("tensor a starts at data byte 4, expected 0"));
  WriteRaw(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8);
  EXPECT_THAT(error(), HasSubstr("the tensors cover 4 of the 8 data bytes"));
  WriteRaw(p, R"({"__metadata__":{"n":3}})", 0);
  EXPECT_THAT(error(), HasSubstr("__metadata__ entry n is not a string"));
  EXPECT_EQ(model::SafetensorsFile::Open(dir + "/none").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ExportedModel, NamesFollowGpt2AndTheAdditionVocabularyMatchesTheTask) {
  model::GptConfig c{3, 16, 2, 32, 6, 12};
  auto name = [&](int layer, const std::string& p) {
    auto t = model::ExportedTensorFor(c, layer, p);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->name + (t->transposed ? " (T)" : "") : "";
  };
  EXPECT_EQ(name(0, "wte"), "wte.weight");
  EXPECT_EQ(name(0, "wpe"), "wpe.weight");
  EXPECT_EQ(name(1, "ln1.gamma"), "h.0.ln_1.weight");
  EXPECT_EQ(name(3, "attn.qkv.weight"), "h.2.attn.c_attn.weight");
  EXPECT_EQ(name(2, "mlp.proj.bias"), "h.1.mlp.c_proj.bias");
  EXPECT_EQ(name(4, "lnf.beta"), "ln_f.bias");
  EXPECT_EQ(name(4, "lm_head.weight"), "lm_head.weight (T)");
  EXPECT_FALSE(model::ExportedTensorFor(c, 2, "wte").ok());
  const std::string vocab = model::kAdditionVocabulary;
  EXPECT_EQ(vocab.size(), 12u);
  EXPECT_EQ(vocab[data::AdditionTask::kPlus], '+');
  EXPECT_EQ(vocab[data::AdditionTask::kEquals], '=');
  for (int d = 0; d < 10; ++d) EXPECT_EQ(vocab[d], '0' + d);
}

// A 4-block model split into 2 stages, each stage written as a checkpoint the way workers do.
class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    spec_.mutable_model()->set_num_layers(4);
    spec_.mutable_model()->set_hidden(16);
    spec_.mutable_model()->set_num_heads(2);
    spec_.mutable_model()->set_ffn_hidden(32);
    spec_.mutable_model()->set_seq_len(8);
    spec_.mutable_model()->set_vocab_size(12);
    spec_.mutable_checkpoint()->set_dir(dir_ + "/ckpt");
    config_ = model::GptConfig{4, 16, 2, 32, 8, 12};
    auto specs = model::SplitEvenly(config_, 2);
    ASSERT_TRUE(specs.ok());
    for (int s = 0; s < 2; ++s) {
      model::ChunkOptions options;
      options.seed = 77;
      auto chunk = model::GptChunk::Create(&backend_, config_, (*specs)[s], options);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      chunks_.push_back(*std::move(chunk));
    }
    for (int64_t step : {3, 5}) {
      for (int s = 0; s < 2; ++s) {
        ASSERT_TRUE(model::SaveChunkCheckpoint(*chunks_[s], step,
                                               model::StageCheckpointPath(Ckpt(), step, s))
                        .ok());
      }
    }
  }
  std::string Ckpt() const { return spec_.checkpoint().dir(); }
  absl::StatusOr<client::ExportResult> Export(int64_t step, const std::string& out) {
    client::ExportRequest r;
    r.job_id = "job-000007";
    r.spec = spec_;
    r.num_stages = 2;
    r.step = step;
    r.output = out;
    return client::ExportCheckpoint(r);
  }

  kernels::CpuBackend backend_;
  std::string dir_;
  v1::JobSpec spec_;
  model::GptConfig config_;
  std::vector<std::unique_ptr<model::GptChunk>> chunks_;
};

TEST_F(ExportTest, GathersEveryStageBitwiseWithGpt2NamesAndConfig) {
  const std::string out = dir_ + "/model.safetensors";
  auto result = Export(0, out);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step, 5) << "no manifest: the newest step with every stage file";
  EXPECT_EQ(result->tensors, 2 + 4 * 12 + 3);
  auto file = model::SafetensorsFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->tensors().size(), 2u + 4 * 12 + 3);
  EXPECT_EQ(file->tensors().front().name, "wte.weight") << "data in model order";
  EXPECT_EQ(file->tensors().back().name, "lm_head.weight");
  int64_t scalars = 0;
  for (auto& chunk : chunks_) {
    for (model::Parameter* p : chunk->parameters()) {
      auto exported = model::ExportedTensorFor(config_, p->global_layer, p->name);
      ASSERT_TRUE(exported.ok());
      const model::SafetensorsFile::Tensor* t = file->Find(exported->name);
      ASSERT_NE(t, nullptr) << exported->name;
      std::vector<float> ours = *backend_.ToVector(p->value);
      scalars += static_cast<int64_t>(ours.size());
      if (exported->name == "lm_head.weight") {
        EXPECT_EQ(t->shape, (std::vector<int64_t>{12, 16})) << "[vocab, hidden]";
        ours = model::Transposed(ours, 16, 12);
      } else {
        EXPECT_EQ(t->shape, p->value.shape()) << exported->name;
      }
      EXPECT_EQ(std::memcmp(file->Values(*t).data(), ours.data(), ours.size() * 4), 0)
          << exported->name << " differs from the chunk's values";
    }
  }
  EXPECT_EQ(result->parameters, scalars);
  const auto& meta = file->metadata();
  EXPECT_EQ(meta.at("n_layer"), "4");
  EXPECT_EQ(meta.at("n_embd"), "16");
  EXPECT_EQ(meta.at("n_head"), "2");
  EXPECT_EQ(meta.at("n_inner"), "32");
  EXPECT_EQ(meta.at("n_positions"), "8");
  EXPECT_EQ(meta.at("vocab_size"), "12");
  EXPECT_EQ(meta.at("pipetrain.step"), "5");
  EXPECT_EQ(meta.at("pipetrain.job"), "job-000007");
  EXPECT_EQ(meta.at("pipetrain.tokenizer"), "chars");
  EXPECT_EQ(meta.at("pipetrain.vocabulary"), "0123456789+=");
  auto config = model::ConfigFromMetadata(meta);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->DebugString(), config_.DebugString());
}

// A tied model (model.tie_embeddings): the last stage's copy of wte is written once, as GPT-2
// files have it (no lm_head.weight), and the metadata says so, so generate and init_from build
// the tied head.
TEST_F(ExportTest, TiedModelIsExportedAsGpt2WithOneWte) {
  spec_.mutable_model()->set_tie_embeddings(true);
  config_.tie_embeddings = true;
  chunks_.clear();
  auto specs = model::SplitEvenly(config_, 2);
  ASSERT_TRUE(specs.ok());
  const std::string ckpt = dir_ + "/tied";
  spec_.mutable_checkpoint()->set_dir(ckpt);
  for (int s = 0; s < 2; ++s) {
    model::ChunkOptions options;
    options.seed = 77;
    auto chunk = model::GptChunk::Create(&backend_, config_, (*specs)[s], options);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    ASSERT_TRUE(model::SaveChunkCheckpoint(**chunk, 4, model::StageCheckpointPath(ckpt, 4, s))
                    .ok());
    chunks_.push_back(*std::move(chunk));
  }
  const std::string out = dir_ + "/tied.safetensors";
  auto result = Export(4, out);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->tensors, 2 + 4 * 12 + 2);
  auto file = model::SafetensorsFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->Find("lm_head.weight"), nullptr);
  const model::SafetensorsFile::Tensor* wte = file->Find("wte.weight");
  ASSERT_NE(wte, nullptr);
  const std::vector<float> ours = *backend_.ToVector(chunks_[0]->parameters().front()->value);
  EXPECT_EQ(std::memcmp(file->Values(*wte).data(), ours.data(), ours.size() * 4), 0);
  EXPECT_EQ(file->metadata().at("tie_word_embeddings"), "true");
  auto config = model::ConfigFromMetadata(file->metadata());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->tie_embeddings);
  EXPECT_EQ(config->DebugString(), config_.DebugString());
}

TEST_F(ExportTest, DefaultStepIsTheManifestsAndAnExplicitStepIsHonoured) {
  ASSERT_TRUE(model::WriteCheckpointManifest(Ckpt(), {3, 2}).ok());
  auto result = Export(0, dir_ + "/a.safetensors");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step, 3) << "the manifest names the newest checkpoint known complete";
  result = Export(5, dir_ + "/b.safetensors");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step, 5);
}

TEST_F(ExportTest, MissingIncompleteAndCorruptedCheckpointsFailClearly) {
  const std::string out = dir_ + "/m.safetensors";
  auto r = Export(4, out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("step 4: " + Ckpt() + "/step-4 does not exist; complete checkpoints: 3, 5"));

  std::filesystem::remove(model::StageCheckpointPath(Ckpt(), 5, 1));
  r = Export(5, out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("step 5 is incomplete: " + model::StageCheckpointPath(Ckpt(), 5, 1) +
                        " does not exist"));
  r = Export(0, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 3) << "the newest complete step";

  const std::string stage0 = model::StageCheckpointPath(Ckpt(), 3, 0);
  const std::string original = ReadAll(stage0);
  std::string bytes = original;
  bytes[bytes.size() / 2] ^= 0x40;
  WriteAll(stage0, bytes);
  r = Export(3, out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(stage0));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("checksum mismatch"));
  WriteAll(stage0, original);

  spec_.mutable_model()->set_hidden(32);
  spec_.mutable_model()->set_ffn_hidden(64);
  r = Export(0, out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("the job's model is"));

  spec_.mutable_checkpoint()->clear_dir();
  r = Export(0, out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("has no checkpoint.dir"));
}

TEST_F(ExportTest, InitFromLoadsIntoAnyOtherSplitBitwise) {
  const std::string out = dir_ + "/model.safetensors";
  ASSERT_TRUE(Export(0, out).ok());
  std::map<std::string, std::vector<float>> original;
  for (auto& chunk : chunks_) {
    for (model::Parameter* p : chunk->parameters()) {
      original[absl::StrCat(p->global_layer, "/", p->name)] = *backend_.ToVector(p->value);
    }
  }
  for (int stages : {1, 3, 4}) {
    auto specs = model::SplitEvenly(config_, stages);
    ASSERT_TRUE(specs.ok());
    std::vector<std::unique_ptr<model::GptChunk>> fresh;
    std::vector<model::GptChunk*> raw;
    for (const model::ChunkSpec& s : *specs) {
      model::ChunkOptions options;
      options.seed = 5;  // another initialisation: every value must come from the file
      fresh.push_back(*model::GptChunk::Create(&backend_, config_, s, options));
      raw.push_back(fresh.back().get());
    }
    ASSERT_TRUE(model::LoadExportedWeights(out, raw).ok());
    for (model::GptChunk* c : raw) {
      for (model::Parameter* p : c->parameters()) {
        const std::vector<float> v = *backend_.ToVector(p->value);
        const std::vector<float>& want = original[absl::StrCat(p->global_layer, "/", p->name)];
        ASSERT_EQ(v.size(), want.size());
        EXPECT_EQ(std::memcmp(v.data(), want.data(), v.size() * 4), 0)
            << stages << " stages: " << p->name << "@" << p->global_layer;
        EXPECT_EQ(*backend_.ToVector(p->adam_m), std::vector<float>(v.size(), 0.0f));
      }
    }
  }
}

TEST_F(ExportTest, InitFromNamesTheTensorAndBothShapes) {
  const std::string out = dir_ + "/model.safetensors";
  ASSERT_TRUE(Export(0, out).ok());
  model::GptConfig wider = config_;
  wider.hidden = 32;
  wider.ffn = 64;
  auto chunk = model::GptChunk::Create(&backend_, wider, model::WholeModel(wider));
  ASSERT_TRUE(chunk.ok());
  const std::vector<float> before = *backend_.ToVector((*chunk)->parameters()[0]->value);
  std::vector<model::GptChunk*> raw = {chunk->get()};
  absl::Status s = model::LoadExportedWeights(out, raw);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("model.init_from: " + out +
                        ": tensor wte.weight has shape [12, 16], the job's model needs [12, 32]"));
  EXPECT_EQ(*backend_.ToVector((*chunk)->parameters()[0]->value), before) << "left unchanged";

  model::GptConfig deeper = config_;
  deeper.num_layers = 6;
  auto specs = model::SplitEvenly(deeper, 2);
  auto last = model::GptChunk::Create(&backend_, deeper, (*specs)[1]);
  raw = {last->get()};
  s = model::LoadExportedWeights(out, raw);
  EXPECT_THAT(std::string(s.message()), HasSubstr("has no tensor h.4.ln_1.weight"));

  s = model::LoadExportedWeights(dir_ + "/none.safetensors", raw);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.init_from: " + dir_ + "/none.safetensors"));
}

// Files that are not a whole safetensors export are refused before any weight changes, with
// the field and the file first: text, a cut-off copy, an empty file, a directory.
TEST_F(ExportTest, InitFromRefusesFilesThatAreNotAWholeExport) {
  const std::string out = dir_ + "/model.safetensors";
  ASSERT_TRUE(Export(0, out).ok());
  const std::string bytes = [&] {
    std::ifstream in(out, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const std::string text = dir_ + "/notes.txt", cut = dir_ + "/cut.safetensors",
                    empty = dir_ + "/empty.safetensors";
  std::ofstream(text) << "these are not weights\n";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(empty, std::ios::binary).flush();
  std::vector<model::GptChunk*> raw = {chunks_[0].get()};
  const std::vector<float> before = *backend_.ToVector(chunks_[0]->parameters()[0]->value);
  for (const std::string& path : {text, cut, empty, dir_}) {
    const absl::Status s = model::LoadExportedWeights(path, raw);
    EXPECT_FALSE(s.ok()) << path;
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("model.init_from: " + path))
        << s;
    std::printf("%s\n", std::string(s.message()).c_str());
  }
  EXPECT_EQ(*backend_.ToVector(chunks_[0]->parameters()[0]->value), before) << "left unchanged";
}

}  // namespace
}  // namespace pipetrain
