// Control-plane secrets: loaded from a file or the environment (never argv), random tokens, the
// constant-time comparison and the bearer scheme.
#include "common/secret.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace pipetrain {
namespace {

TEST(SecretTest, LoadsFromAFileElseTheEnvironment) {
  const std::string file = ::testing::TempDir() + "/secret_" + std::to_string(::getpid());
  std::ofstream(file) << "  s3cret\n";
  ::setenv("PIPETRAIN_TEST_SECRET", " from-env \n", 1);
  EXPECT_EQ(LoadSecret(file, "PIPETRAIN_TEST_SECRET", "--secret-file").value(), "s3cret");
  EXPECT_EQ(LoadSecret("", "PIPETRAIN_TEST_SECRET", "--secret-file").value(), "from-env");
  ::unsetenv("PIPETRAIN_TEST_SECRET");
  EXPECT_EQ(LoadSecret("", "PIPETRAIN_TEST_SECRET", "--secret-file").value(), "");  // none set

  const absl::StatusOr<std::string> missing =
      LoadSecret(file + ".missing", "PIPETRAIN_TEST_SECRET", "--secret-file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.status().message(), "--secret-file: cannot read " + file + ".missing");
  std::ofstream(file) << "\n \n";
  EXPECT_EQ(LoadSecret(file, "PIPETRAIN_TEST_SECRET", "--secret-file").status().message(),
            "--secret-file: " + file + " is empty");
  std::remove(file.c_str());
}

TEST(SecretTest, RandomTokensAre64HexDigitsAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string token = RandomToken();
    ASSERT_EQ(token.size(), 64u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
    seen.insert(token);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(SecretTest, ComparisonAndBearerScheme) {
  EXPECT_TRUE(SameSecret("abc", "abc"));
  EXPECT_FALSE(SameSecret("abc", "abd"));
  EXPECT_FALSE(SameSecret("abc", "abcd"));
  EXPECT_TRUE(SameSecret("", ""));
  EXPECT_EQ(BearerToken("Bearer tok"), "tok");
  EXPECT_EQ(BearerToken("bearer tok"), "tok");  // the scheme is case-insensitive
  EXPECT_EQ(BearerToken("BEARER tok"), "tok");
  EXPECT_FALSE(BearerToken("Basic dXNlcg==").has_value());
  EXPECT_FALSE(BearerToken("tok").has_value());
}

}  // namespace
}  // namespace pipetrain
