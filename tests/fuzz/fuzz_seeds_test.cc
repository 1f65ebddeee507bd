// The fuzzers' seeds (tests/fuzz/seeds*/) stay meaningful as the code changes: every seed is a
// valid spec that keeps the spec contract, and the default-job seeds are the embedded default job.
// Built in every build (the fuzz targets themselves need clang).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/default_job.h"
#include "client/job_file.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/coordinator/spec_contract.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;
using ::google::protobuf::util::MessageDifferencer;

const fs::path kFuzzDir = PIPETRAIN_FUZZ_DIR;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void ExpectValid(const v1::JobSpec& spec, const fs::path& path) {
  const coordinator::SpecContractResult result = coordinator::CheckSpecContract(spec);
  EXPECT_EQ(result.broken, "") << path;
  EXPECT_TRUE(result.valid) << path << " is not a valid spec";
}

TEST(FuzzSeedsTest, BinarySeedsAreValidSpecs) {
  int seeds = 0;
  for (const auto& entry : fs::directory_iterator(kFuzzDir / "seeds")) {
    if (entry.path().extension() != ".textproto") continue;
    ++seeds;
    v1::JobSpec spec;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(Read(entry.path()), &spec))
        << entry.path();
    ExpectValid(spec, entry.path());
    if (entry.path().filename() == "default_job.textproto") {
      EXPECT_TRUE(MessageDifferencer::Equals(spec, client::DefaultJobSpec()));
    }
  }
  EXPECT_GE(seeds, 5);
}

TEST(FuzzSeedsTest, TextSeedsAreValidJobFiles) {
  int seeds = 0;
  for (const auto& entry : fs::directory_iterator(kFuzzDir / "seeds_text")) {
    ++seeds;
    const absl::StatusOr<v1::JobSpec> spec =
        client::ParseJobSpec(Read(entry.path()), entry.path().filename().string());
    ASSERT_TRUE(spec.ok()) << spec.status();
    ExpectValid(*spec, entry.path());
    if (entry.path().filename() == "default_job.yaml") {
      EXPECT_TRUE(MessageDifferencer::Equals(*spec, client::DefaultJobSpec()));
    }
  }
  EXPECT_GE(seeds, 3);
}

}  // namespace
}  // namespace pipetrain
