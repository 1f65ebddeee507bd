// Jobs shared by the end-to-end tests, and the oracle they are checked against: the
// single-process reference trainer's losses for the same spec.
#ifndef PIPETRAIN_TESTS_E2E_E2E_JOBS_H_
#define PIPETRAIN_TESTS_E2E_E2E_JOBS_H_

#include <string>
#include <vector>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::testing {

// A small GPT (2p layers, hidden 32) on the default addition task, m microbatches of 4.
v1::JobSpec SmallJob(const std::string& schedule, int workers, int microbatches, int steps);
// Per-step losses of the reference trainer (whole model, one process) for `spec`.
std::vector<double> ReferenceLosses(const v1::JobSpec& spec);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_E2E_JOBS_H_
