// `pipetrain data prepare`'s library (client/data_prepare.h) on a few-MB corpus made of the
// repository's own docs/*.md: the files agree with meta.json, every id is below the vocabulary,
// the written tokenizer.model decodes val.bin back to exactly the corpus's tail (and train.bin to
// the rest), encoding in pieces on several threads gives the same ids as one piece, and every
// bad flag or unreadable input is an InvalidArgument naming the flag. This binary links
// libsentencepiece and must not link protobuf (client/sentencepiece_tokenizer.h).
#include "client/data_prepare.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "client/sentencepiece_tokenizer.h"
#include "nlohmann/json.hpp"

namespace pipetrain::client {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string FreshDir() {
  std::string templ = ::testing::TempDir() + "/pipetrain_prepare_XXXXXX";
  EXPECT_NE(::mkdtemp(templ.data()), nullptr);
  return templ;
}

// docs/*.md, sorted, concatenated `copies` times.
std::string DocsCorpus(int copies) {
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(fs::path(PIPETRAIN_SOURCE_DIR) / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path());
  }
  std::sort(docs.begin(), docs.end());
  EXPECT_GE(docs.size(), 5u);
  std::string once;
  for (const fs::path& p : docs) once += Read(p.string());
  std::string text;
  for (int i = 0; i < copies; ++i) text += once;
  return text;
}

std::vector<int> ReadIds(const std::string& path, int width) {
  const std::string bytes = Read(path);
  EXPECT_EQ(bytes.size() % width, 0u) << path;
  std::vector<int> ids(bytes.size() / width);
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t v = 0;
    for (int b = 0; b < width; ++b) {
      v |= uint32_t{static_cast<unsigned char>(bytes[i * width + b])} << (8 * b);
    }
    ids[i] = static_cast<int>(v);
  }
  return ids;
}

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path) {
  std::string error;
  std::unique_ptr<Tokenizer> t = Tokenizer::FromSerialized(Read(path), &error);
  EXPECT_NE(t, nullptr) << error;
  return t;
}

TEST(DataPrepareTest, FewMegabytesOfDocsRoundTripExactly) {
  const std::string dir = FreshDir();
  const std::string corpus_text = DocsCorpus(/*copies=*/20);
  ASSERT_GT(corpus_text.size(), 1u << 20);
  const std::string corpus = dir + "/docs corpus.txt";  // a space: the snippet quotes paths
  Write(corpus, corpus_text);
  DataPrepareOptions options;
  options.input = corpus;
  options.output = dir + "/out";
  options.vocab_size = 1000;
  options.val_fraction = 0.01;
  options.threads = 2;
  options.progress_min_bytes = 0;              // show progress on this small input
  options.encode_chunk_bytes = 64 << 10;       // many pieces, two at a time
  options.tokenizer_sample_bytes = 512 << 10;  // the trainer sees a sample
  std::ostringstream progress;
  absl::StatusOr<PreparedData> data = PrepareData(options, progress);
  ASSERT_TRUE(data.ok()) << data.status();

  // meta.json is what was written, and agrees with the files.
  const nlohmann::json meta = nlohmann::json::parse(Read(options.output + "/meta.json"));
  EXPECT_EQ(meta["format"], "pipetrain-tokens-v1");
  EXPECT_EQ(meta["dtype"], "uint16");
  EXPECT_EQ(meta["vocab_size"], 1000);
  EXPECT_EQ(meta["input_name"], "docs corpus.txt");
  EXPECT_EQ(meta["input_bytes"], static_cast<int64_t>(corpus_text.size()));
  EXPECT_EQ(meta["model_type"], "bpe");
  const int64_t val_start = meta["val_start_byte"];
  EXPECT_EQ(val_start, data->val_start_byte);
  const std::vector<int> train = ReadIds(options.output + "/train.bin", 2);
  const std::vector<int> val = ReadIds(options.output + "/val.bin", 2);
  EXPECT_EQ(meta["train_tokens"], static_cast<int64_t>(train.size()));
  EXPECT_EQ(meta["val_tokens"], static_cast<int64_t>(val.size()));
  EXPECT_GT(val.size(), 1000u);
  EXPECT_GT(train.size(), 50 * val.size());
  for (const std::vector<int>* ids : {&train, &val}) {
    EXPECT_LT(*std::max_element(ids->begin(), ids->end()), 1000);
    EXPECT_GE(*std::min_element(ids->begin(), ids->end()), 0);
  }
  // The validation text is the last 1%, from a line start.
  EXPECT_GE(val_start, static_cast<int64_t>(corpus_text.size() * 0.99));
  EXPECT_LT(val_start, static_cast<int64_t>(corpus_text.size()));
  EXPECT_EQ(corpus_text[val_start - 1], '\n');

  // The written tokenizer gives the text back: val is the tail, train the rest.
  std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(options.output + "/tokenizer.model");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 1000);
  std::string tail, head;
  ASSERT_EQ(tokenizer->Decode(val, &tail), "");
  EXPECT_EQ(tail, corpus_text.substr(val_start));
  ASSERT_EQ(tokenizer->Decode(train, &head), "");
  EXPECT_TRUE(head == corpus_text.substr(0, val_start)) << "train.bin does not decode to the head";
  // Encoding in one piece gives the ids written from many pieces.
  std::vector<int> whole;
  ASSERT_EQ(tokenizer->Encode(corpus_text.substr(val_start), &whole), "");
  EXPECT_EQ(whole, val);

  // Progress by bytes, ending at the input's size.
  EXPECT_NE(progress.str().find("pipetrain data prepare: encoded"), std::string::npos)
      << progress.str();
  EXPECT_NE(progress.str().find("(100%)"), std::string::npos) << progress.str();

  // The job-file lines name the directory (quoted), the vocabulary and the dtype.
  const std::string snippet = JobFileSnippet(*data);
  EXPECT_NE(snippet.find("vocab_size: 1000\n"), std::string::npos) << snippet;
  EXPECT_NE(snippet.find("source: tokens\n"), std::string::npos) << snippet;
  EXPECT_NE(
      snippet.find("path: \"" + fs::absolute(options.output).lexically_normal().string() + "\"\n"),
      std::string::npos)
      << snippet;
  EXPECT_NE(snippet.find("token_dtype: uint16\n"), std::string::npos) << snippet;
}

// The same corpus and flags give the same files; cutting the text into other pieces and
// encoding them on more threads gives the same ids. Without a validation part no val.bin is left
// behind (not even from an earlier run).
TEST(DataPrepareTest, DeterministicAndValOptional) {
  const std::string dir = FreshDir();
  Write(dir + "/c.txt", DocsCorpus(1));
  DataPrepareOptions a;
  a.input = dir + "/c.txt";
  a.output = dir + "/a";
  a.vocab_size = 400;
  a.val_fraction = 0.05;
  a.threads = 1;
  a.encode_chunk_bytes = 1 << 30;
  DataPrepareOptions again = a;
  again.output = dir + "/again";
  DataPrepareOptions b = a;
  b.output = dir + "/b";
  b.threads = 3;
  b.encode_chunk_bytes = 3000;
  std::ostringstream quiet;
  for (const DataPrepareOptions* o : {&a, &again, &b}) {
    const absl::Status status = PrepareData(*o, quiet).status();
    ASSERT_TRUE(status.ok()) << status;
  }
  EXPECT_TRUE(quiet.str().empty()) << "progress on a small input: " << quiet.str();
  for (const char* file : {"train.bin", "val.bin", "tokenizer.model", "meta.json"}) {
    const std::string x = Read(a.output + "/" + file);
    EXPECT_FALSE(x.empty()) << file;
    EXPECT_TRUE(x == Read(again.output + "/" + file)) << file << " differs between two runs";
    // (tokenizer.model records the trainer's thread count, so only the ids are compared.)
    if (std::string(file) != "tokenizer.model") {
      EXPECT_TRUE(x == Read(b.output + "/" + file)) << file << " differs with other pieces";
    }
  }
  a.val_fraction = 0;
  absl::StatusOr<PreparedData> zero = PrepareData(a, quiet);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->val_tokens, 0);
  EXPECT_FALSE(fs::exists(a.output + "/val.bin"));
  const nlohmann::json meta = nlohmann::json::parse(Read(a.output + "/meta.json"));
  EXPECT_EQ(meta["val_tokens"], 0);
  EXPECT_EQ(meta["val_start_byte"], meta["input_bytes"]);
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(a.output + "/train.bin")), 2 * zero->train_tokens);
}

// One long line (no line ends at all): the trainer gets it in pieces, the encoder cuts it before
// spaces, and the text still comes back exactly.
TEST(DataPrepareTest, TextWithoutLineEndsRoundTrips) {
  const std::string dir = FreshDir();
  std::string text = DocsCorpus(1);
  std::replace(text.begin(), text.end(), '\n', ' ');
  Write(dir + "/line.txt", text);
  DataPrepareOptions o;
  o.input = dir + "/line.txt";
  o.output = dir + "/out";
  o.vocab_size = 400;
  o.val_fraction = 0.1;
  o.threads = 2;
  o.encode_chunk_bytes = 5000;
  o.tokenizer_sample_bytes = 20000;  // samples of a line-less text
  std::ostringstream quiet;
  absl::StatusOr<PreparedData> data = PrepareData(o, quiet);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_NEAR(data->val_start_byte, text.size() * 0.9, 2);
  std::unique_ptr<Tokenizer> tokenizer = LoadTokenizer(o.output + "/tokenizer.model");
  ASSERT_NE(tokenizer, nullptr);
  std::string train, val;
  ASSERT_EQ(tokenizer->Decode(ReadIds(o.output + "/train.bin", 2), &train), "");
  ASSERT_EQ(tokenizer->Decode(ReadIds(o.output + "/val.bin", 2), &val), "");
  EXPECT_TRUE(train + val == text);
  EXPECT_EQ(val, text.substr(data->val_start_byte));
}

TEST(DataPrepareTest, ValidationStartsAtALineStart) {
  EXPECT_EQ(ValidationStart("aaaa\nbbbb\ncccc\n", 0), 15);
  // No line start after the cut: the cut itself (the tail of the last line).
  EXPECT_EQ(ValidationStart("aaaa\nbbbb\ncccc\n", 0.2), 12);
  EXPECT_EQ(ValidationStart("aaaa\nbbbb\ncccc\n", 0.5), 10);
  EXPECT_EQ(ValidationStart("aaaa\nbbbb\ncccc\n", 1.0), 0);
  // ... moved to a character start (not inside the 2-byte "é").
  EXPECT_EQ(ValidationStart("abcdefgh\xc3\xa9xy", 0.25), 10);
  EXPECT_EQ(ValidationStart("", 0.5), 0);
}

TEST(DataPrepareTest, BadFlagsAndInputsNameTheFlag) {
  const std::string dir = FreshDir();
  Write(dir + "/c.txt", DocsCorpus(1));
  Write(dir + "/empty.txt", "");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  DataPrepareOptions good;
  good.input = dir + "/c.txt";
  good.output = dir + "/out";
  good.vocab_size = 400;
  const struct {
    std::function<void(DataPrepareOptions&)> change;
    std::string says;
  } cases[] = {
      {[](DataPrepareOptions& o) { o.input.clear(); }, "--input: required"},
      {[](DataPrepareOptions& o) { o.output.clear(); }, "--output: required"},
      {[](DataPrepareOptions& o) { o.vocab_size = 100; },
       "--vocab-size: 100 is not allowed; allowed: 260..4194304"},
      {[](DataPrepareOptions& o) { o.val_fraction = 0.9; },
       "--val-fraction: 0.9 is not allowed; allowed: 0..0.5"},
      {[](DataPrepareOptions& o) { o.model_type = "wordpiece"; },
       "--model-type: \"wordpiece\" is not allowed; allowed: bpe, unigram"},
      {[](DataPrepareOptions& o) { o.threads = -1; }, "--threads: -1 is not allowed"},
      {[&](DataPrepareOptions& o) { o.input = dir + "/nope.txt"; },
       "--input: " + dir + "/nope.txt: no such file"},
      {[&](DataPrepareOptions& o) { o.input = dir; },
       "--input: " + dir + ": is a directory, not a regular file"},
      {[&](DataPrepareOptions& o) { o.input = dir + "/fifo"; },
       "--input: " + dir + "/fifo: is a FIFO, not a regular file"},
      {[](DataPrepareOptions& o) { o.input = "/dev/zero"; },
       "--input: /dev/zero: is a character device, not a regular file"},
      {[&](DataPrepareOptions& o) { o.input = dir + "/empty.txt"; },
       "--input: " + dir + "/empty.txt: is empty"},
      {[&](DataPrepareOptions& o) { o.output = dir + "/c.txt"; }, "--output: " + dir + "/c.txt"},
      // More pieces than this corpus has: the trainer's reason, under the flag's name.
      {[](DataPrepareOptions& o) { o.vocab_size = 1 << 20; }, "--vocab-size: 1048576: no bpe"},
  };
  for (const auto& c : cases) {
    DataPrepareOptions o = good;
    c.change(o);
    std::ostringstream progress;
    const absl::Status status = PrepareData(o, progress).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.says << ": " << status;
    EXPECT_NE(status.message().find(c.says), std::string::npos)
        << "want \"" << c.says << "\" in " << status;
  }
}

}  // namespace
}  // namespace pipetrain::client
