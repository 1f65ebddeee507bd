// CheckPathUnder: a job's paths are taken only under the worker's roots, compared after symlinks
// and ".." are resolved and component by component.
#include "worker/runtime/allowed_paths.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace pipetrain::worker {
namespace {

namespace fs = std::filesystem;

class AllowedPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) / ("allowed_paths_" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "root" / "data");
    fs::create_directories(base_ / "root-evil");
    std::ofstream(base_ / "root" / "data" / "corpus.txt") << "text";
    std::ofstream(base_ / "secret") << "secret";
    fs::create_symlink(base_ / "secret", base_ / "root" / "data" / "link-out");
    fs::create_symlink(base_ / "root" / "data" / "corpus.txt", base_ / "link-in");
  }
  void TearDown() override { fs::remove_all(base_); }

  absl::Status Check(const fs::path& path) {
    return CheckPathUnder("training.data.path", path.string(), (base_ / "root").string(),
                          "--data-root");
  }

  fs::path base_;
};

TEST_F(AllowedPathsTest, PathsUnderTheRootAreAllowed) {
  EXPECT_TRUE(Check(base_ / "root" / "data" / "corpus.txt").ok());
  EXPECT_TRUE(Check(base_ / "root").ok());
  // Not there yet (a checkpoint directory a job will create).
  EXPECT_TRUE(Check(base_ / "root" / "ckpt" / "step-10").ok());
  // A detour that stays inside.
  EXPECT_TRUE(Check(base_ / "root" / "data" / ".." / "data" / "corpus.txt").ok());
  EXPECT_TRUE(Check("").ok());  // no path: nothing to check
  // "/" allows anything.
  EXPECT_TRUE(CheckPathUnder("training.data.path", "/etc/passwd", "/", "--data-root").ok());
}

TEST_F(AllowedPathsTest, PathsOutsideTheRootAreRefusedNamingTheFieldAndTheFlag) {
  const absl::Status dotdot = Check(base_ / "root" / ".." / "secret");
  EXPECT_EQ(dotdot.code(), absl::StatusCode::kPermissionDenied) << dotdot;
  EXPECT_NE(dotdot.message().find("training.data.path: "), std::string::npos) << dotdot;
  EXPECT_NE(dotdot.message().find("(resolved: " + (base_ / "secret").string() + ")"),
            std::string::npos)
      << dotdot;
  EXPECT_NE(dotdot.message().find("is outside this worker's --data-root " +
                                  (base_ / "root").string()),
            std::string::npos)
      << dotdot;
  // A symlink inside the root that points out of it.
  EXPECT_EQ(Check(base_ / "root" / "data" / "link-out").code(),
            absl::StatusCode::kPermissionDenied);
  // A sibling whose name merely starts with the root's.
  EXPECT_EQ(Check(base_ / "root-evil").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check("/etc/shadow").code(), absl::StatusCode::kPermissionDenied);
  // A link from outside that points in is judged by where it leads.
  EXPECT_TRUE(Check(base_ / "link-in").ok());
}

TEST_F(AllowedPathsTest, RelativePathsAreTakenFromTheWorkingDirectory) {
  const fs::path before = fs::current_path();
  fs::current_path(base_ / "root");
  EXPECT_TRUE(Check("data/corpus.txt").ok());
  EXPECT_EQ(Check("../secret").code(), absl::StatusCode::kPermissionDenied);
  fs::current_path(before);
}

}  // namespace
}  // namespace pipetrain::worker
