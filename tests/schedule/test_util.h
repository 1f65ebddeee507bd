// Helpers shared by the schedule tests: build schedules from text rows, and specs.
// Thread-safety: test-only free functions.
#ifndef PIPETRAIN_TESTS_SCHEDULE_TEST_UTIL_H_
#define PIPETRAIN_TESTS_SCHEDULE_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "schedule/action.h"
#include "schedule/generator.h"
#include "schedule/schedule.h"

namespace pipetrain::schedule::testing {

// rows[w] is worker w's list as space-separated action tokens, e.g. "0F0 0F1 0B0 0B1".
inline Schedule FromRows(int num_microbatches, std::vector<int> placement,
                         const std::vector<std::string>& rows) {
  int p = 0;
  for (int w : placement) p = std::max(p, w + 1);
  p = std::max(p, static_cast<int>(rows.size()));
  Schedule s = MakeEmptySchedule("test", p, num_microbatches, std::move(placement));
  for (size_t w = 0; w < rows.size(); ++w) {
    for (absl::string_view tok : absl::StrSplit(rows[w], ' ', absl::SkipEmpty())) {
      auto a = ParseAction(tok);
      EXPECT_TRUE(a.ok()) << a.status();
      if (a.ok()) s.worker_actions[w].push_back(*a);
    }
  }
  return s;
}

// A spec for p workers and m microbatches; f, b, w for a worker's whole share (generator.h).
inline PipelineSpec Spec(int p, int m, double f = 1, double b = 1, double w = 1, double comm = 0) {
  PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = m;
  spec.f = f;
  spec.b = b;
  spec.w = w;
  spec.comm = comm;
  return spec;
}

}  // namespace pipetrain::schedule::testing

#endif  // PIPETRAIN_TESTS_SCHEDULE_TEST_UTIL_H_
