// Plan files for tests that run pipetrain-worker processes: written by the product's one
// writer (planner/plan_file.h), each with free loopback ports and a job id of its own, so that
// concurrent process tests never take each other's connections.
#ifndef PIPETRAIN_TESTS_E2E_PLAN_FILES_H_
#define PIPETRAIN_TESTS_E2E_PLAN_FILES_H_

#include <string>

#include "pipetrain/v1/job.pb.h"
#include "pipetrain/v1/plan.pb.h"

namespace pipetrain::testing {

// Writes the plan file to `path` and returns `path`; fails the test if it cannot.
std::string WritePlanFile(const v1::JobSpec& spec, const v1::Plan& plan, const std::string& path);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_PLAN_FILES_H_
