// pipetrain_build_info (common/build_info.h): one series, value 1, whose labels are what
// --version prints: the CMake project version and the git revision of the build.
#include "common/build_info.h"

#include <prometheus/text_serializer.h>

#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pipetrain {
namespace {

using ::testing::HasSubstr;

TEST(BuildInfoTest, OneSeriesWithTheVersionAndRevision) {
  EXPECT_EQ(ProjectVersion(), PIPETRAIN_EXPECTED_VERSION);  // CMake's PROJECT_VERSION
  EXPECT_FALSE(GitRevision().empty());
  EXPECT_EQ(VersionLine("pipetrain-worker"),
            "pipetrain-worker " + ProjectVersion() + " (git " + GitRevision() + ")");

  prometheus::Registry registry;
  RegisterBuildInfo(registry, "pipetrain-worker");
  const std::string body = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_THAT(body, HasSubstr("# TYPE pipetrain_build_info gauge"));
  EXPECT_THAT(body, HasSubstr("pipetrain_build_info{program=\"pipetrain-worker\",revision=\"" +
                              GitRevision() + "\",version=\"" + ProjectVersion() + "\"} 1\n"));
}

}  // namespace
}  // namespace pipetrain
