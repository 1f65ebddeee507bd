// `pipetrain local`'s summary ends with the trained model: a job without checkpoints gets one
// after its last step, the coordinator commits it, the client exports it to
// <dir>/model.safetensors and `pipetrain generate` completes a few additions, printed next to
// their true sums.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/process_util.h"

namespace pipetrain {
namespace {

TEST(LocalSummary, ShowsSampledAdditionsFromTheExportedModel) {
  const std::string dir = testing::TempDir() + "/cluster";
  testing::Process local = testing::Spawn(
      {PIPETRAIN_CLIENT_BIN, "local", "--steps", "12", "--dir", dir, "--no-progress"},
      testing::TempDir() + "/local");
  const std::optional<int> code = testing::WaitFor(local, absl::Seconds(240));
  const std::string out = testing::ReadFile(local.stdout_path);
  const std::string err = testing::ReadFile(local.stderr_path);
  ASSERT_TRUE(code.has_value()) << out << err;
  ASSERT_EQ(*code, 0) << out << err;
  EXPECT_NE(out.find(absl::StrCat("exported step 12 to ", dir, "/model.safetensors")),
            std::string::npos)
      << out;
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/model.safetensors"));
  ASSERT_NE(out.find("sampled additions"), std::string::npos) << out;
  // "  17+58 = 75   model: 75    right": the true sum is the operands' sum.
  const std::regex line(R"(^  (\d\d)\+(\d\d) = (\d+) +model: (\S+) +(right|WRONG)$)");
  int samples = 0;
  for (const std::string& l : std::vector<std::string>(absl::StrSplit(out, '\n'))) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    ++samples;
    EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), std::stoi(m[3])) << l;
    EXPECT_EQ(m[5] == "right", m[4] == m[3].str()) << l;
  }
  EXPECT_EQ(samples, 6) << out;
  EXPECT_NE(out.find(" of 6 right"), std::string::npos) << out;
}

}  // namespace
}  // namespace pipetrain
