#include "tests/e2e/token_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/e2e/process_util.h"

namespace pipetrain::testing {

namespace fs = std::filesystem;

TokenCorpus PrepareDocsCorpus(const std::string& client_bin, const std::string& dir,
                              int vocab_size) {
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(fs::path(PIPETRAIN_SOURCE_DIR) / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path());
  }
  std::sort(docs.begin(), docs.end());
  const std::string corpus = dir + "/docs.txt";
  {
    std::ofstream out(corpus, std::ios::binary);
    for (const fs::path& p : docs) out << std::ifstream(p, std::ios::binary).rdbuf();
  }
  TokenCorpus result{dir + "/tokens", vocab_size};
  const Process prepare =
      Spawn({client_bin, "data", "prepare", "--input", corpus, "--output", result.dir,
             "--vocab-size", std::to_string(vocab_size), "--val-fraction", "0.05"},
            dir + "/prepare");
  const std::optional<int> code = WaitFor(prepare, absl::Seconds(120));
  EXPECT_EQ(code, std::optional<int>(0)) << ReadFile(prepare.stderr_path);
  EXPECT_NE(ReadFile(prepare.stdout_path).find("token_dtype: uint16"), std::string::npos)
      << ReadFile(prepare.stdout_path);
  return result;
}

std::string WidenToUint32(const std::string& path, const std::string& out) {
  std::ifstream in(path, std::ios::binary);
  std::ofstream o(out, std::ios::binary | std::ios::trunc);
  char b[2];
  while (in.read(b, 2)) {
    const char wide[4] = {b[0], b[1], 0, 0};  // little-endian: the high bytes are zero
    o.write(wide, 4);
  }
  o.close();
  EXPECT_TRUE(o.good()) << out;
  EXPECT_EQ(fs::file_size(out), 2 * fs::file_size(path));
  return out;
}

v1::JobSpec WithTokens(v1::JobSpec spec, const std::string& path, int vocab_size,
                       const std::string& dtype, int seq_len) {
  spec.mutable_model()->set_vocab_size(vocab_size);
  spec.mutable_model()->set_seq_len(seq_len);
  v1::DataSpec* data = spec.mutable_training()->mutable_data();
  data->set_source("tokens");
  data->set_path(path);
  data->set_token_dtype(dtype);
  return spec;
}

bool MapsFile(int pid, const std::string& path) {
  std::error_code ec;
  const std::string canonical = fs::weakly_canonical(path, ec).string();
  return ReadFile(absl::StrCat("/proc/", pid, "/maps")).find(canonical) != std::string::npos;
}

}  // namespace pipetrain::testing
