// ValidateSchedule's one-pass fast path must give exactly the full validator's answer (verdict
// and message), on valid schedules and on randomly broken ones; and the engine must not report
// a deadlock for a runnable schedule whose actions sit on the wrong worker.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {
namespace {

Schedule Mutate(const Schedule& s, std::mt19937& rng) {
  Schedule o = s;
  const int w = static_cast<int>(rng() % o.num_workers);
  auto& list = o.worker_actions[w];
  if (list.empty()) return o;
  const int k = static_cast<int>(rng() % list.size());
  switch (rng() % 8) {
    case 0:
      if (k + 1 < static_cast<int>(list.size())) std::swap(list[k], list[k + 1]);
      break;
    case 1:
      list.erase(list.begin() + k);
      break;
    case 2:
      list.insert(list.begin() + static_cast<int>(rng() % list.size()), list[k]);
      break;
    case 3: {
      const Action a = list[k];
      list.erase(list.begin() + k);
      auto& other = o.worker_actions[rng() % o.num_workers];
      other.insert(other.begin() + (other.empty() ? 0 : static_cast<int>(rng() % other.size())), a);
      break;
    }
    case 4:
      list[k].kind = static_cast<ActionKind>(rng() % kNumActionKinds);
      break;
    case 5:
      list[k].microbatch = static_cast<int>(rng() % (o.num_microbatches + 1));
      break;
    case 6:
      std::swap(list[k], list[rng() % list.size()]);
      break;
    default:
      list.insert(list.begin() + k, Action{static_cast<ActionKind>(4 + rng() % 4),
                                           static_cast<int>(rng() % o.num_stages),
                                           static_cast<int>(rng() % o.num_microbatches)});
      break;
  }
  return o;
}

TEST(ValidatorFastPathTest, AgreesWithFullValidatorOnValidAndBrokenSchedules) {
  std::mt19937 rng(7);
  int rejected = 0;
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "v-half"}) {
    for (int p : {1, 2, 3, 4}) {
      for (int m : {1, 4, 8}) {
        PipelineSpec spec;
        spec.num_workers = p;
        spec.num_microbatches = m;
        absl::StatusOr<Schedule> s = Generate(name, spec);
        if (!s.ok()) continue;
        absl::StatusOr<Schedule> t = AddTransfers(*s);
        ASSERT_TRUE(t.ok()) << t.status();
        for (const Schedule* base : {&*s, &*t}) {
          ASSERT_TRUE(ValidateScheduleFull(*base).ok()) << name;
          for (int i = 0; i < 40; ++i) {
            const Schedule bad = Mutate(*base, rng);
            const absl::Status fast = ValidateSchedule(bad), full = ValidateScheduleFull(bad);
            EXPECT_EQ(fast, full) << name << " p=" << p << " m=" << m << " case " << i;
            rejected += !full.ok();
          }
        }
      }
    }
  }
  EXPECT_GT(rejected, 1000);  // the mutations really do break schedules
}

TEST(EngineTest, MisplacedActionDoesNotFakeADeadlock) {
  // GPipe p=2, m=1 with stage 1's F moved to worker 0's list: invalid, but runnable.
  PipelineSpec spec;
  spec.num_workers = 2;
  spec.num_microbatches = 1;
  absl::StatusOr<Schedule> s = Generate("gpipe", spec);
  ASSERT_TRUE(s.ok());
  Schedule bad = *s;
  bad.worker_actions[1].erase(bad.worker_actions[1].begin());  // 1F0
  bad.worker_actions[0].insert(bad.worker_actions[0].begin() + 1, Action{ActionKind::kF, 1, 0});
  EXPECT_FALSE(ValidateSchedule(bad).ok());
  absl::StatusOr<SimResult> r = Simulate(bad, CostModelFor(spec, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  // Worker 0: 0F0 [0,1], 1F0 [1,2]; worker 1: 1BW0 [2,4]; worker 0: 0BW0 [4,6].
  EXPECT_DOUBLE_EQ(r->makespan, 6.0);
}

}  // namespace
}  // namespace pipetrain::schedule
