#include "client/model_samples.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/local_cluster.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace pipetrain::client {

absl::StatusOr<std::vector<AdditionSample>> SampleAdditions(const std::string& weights,
                                                            int count,
                                                            const std::string& generate_binary) {
  std::string binary = generate_binary;
  if (binary.empty()) {
    PT_ASSIGN_OR_RETURN(binary, FindBinary("pipetrain-generate"));
  }
  std::vector<AdditionSample> samples;
  std::vector<std::string> argv = {binary, "--weights", weights, "--max-tokens", "3",
                                   "--completion-only"};
  for (int i = 0; i < count; ++i) {
    AdditionSample s;
    // Operands spread over 0..99 by two coprime strides: fixed, so runs compare.
    s.a = (17 + 37 * i) % 100;
    s.b = (58 + 61 * i) % 100;
    argv.push_back("--prompt");
    argv.push_back(absl::StrFormat("%02d+%02d=", s.a, s.b));
    samples.push_back(s);
  }
  const std::string dir = subprocess::TempDir();
  const subprocess::Process p = subprocess::Spawn(argv, dir + "/generate");
  const std::optional<int> code = subprocess::WaitFor(p, absl::Seconds(120));
  const std::string out = subprocess::ReadFile(dir + "/generate.out");
  const std::string err = subprocess::ReadFile(dir + "/generate.err");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (code != 0) {
    return absl::InternalError(absl::StrCat("pipetrain generate failed (",
                                            code ? absl::StrCat("exit ", *code) : "timed out",
                                            "): ", err));
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  if (lines.size() != samples.size()) {
    return absl::InternalError(absl::StrCat("pipetrain generate printed ", lines.size(),
                                            " lines for ", samples.size(), " prompts: ", out));
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    AdditionSample& s = samples[i];
    s.completion = lines[i];
    if (!s.completion.empty() &&
        std::all_of(s.completion.begin(), s.completion.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      std::string digits(s.completion.rbegin(), s.completion.rend());  // most significant first
      s.answer = absl::StrCat(std::stoi(digits));
      s.correct = s.answer == absl::StrCat(s.a + s.b);
    }
  }
  return samples;
}

std::string FormatAdditionSamples(const std::vector<AdditionSample>& samples) {
  std::string text;
  int right = 0;
  for (const AdditionSample& s : samples) {
    right += s.correct ? 1 : 0;
    absl::StrAppendFormat(&text, "  %02d+%02d = %-4d model: %-5s %s\n", s.a, s.b, s.a + s.b,
                          s.answer.empty() ? absl::StrCat("\"", s.completion, "\"") : s.answer,
                          s.correct ? "right" : "WRONG");
  }
  absl::StrAppendFormat(&text, "  %d of %zu right\n", right, samples.size());
  return text;
}

}  // namespace pipetrain::client
