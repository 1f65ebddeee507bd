#include "tests/e2e/plan_files.h"

#include <unistd.h>

#include <atomic>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/job_model.h"
#include "planner/plan_file.h"
#include "tests/e2e/process_util.h"

namespace pipetrain::testing {

std::string WritePlanFile(const v1::JobSpec& spec, const v1::Plan& plan, const std::string& path) {
  static std::atomic<int> counter{0};
  planner::PlanFileOptions options;
  options.job_id = absl::StrCat("test-", ::getpid(), "-", counter++);
  // Every worker of the job: d data-parallel replicas of the plan's ranks.
  for (int r = 0; r < plan.workers_size() * model::DataParallelSize(spec); ++r) {
    options.addresses.push_back(absl::StrCat("127.0.0.1:", FreePort()));
  }
  absl::StatusOr<std::string> json = planner::PlanFileJson(spec, plan, options);
  EXPECT_TRUE(json.ok()) << json.status();
  std::ofstream out(path);
  out << json.value_or("");
  EXPECT_TRUE(out.good()) << "cannot write " << path;
  return path;
}

}  // namespace pipetrain::testing
