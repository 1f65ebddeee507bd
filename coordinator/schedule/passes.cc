#include "coordinator/schedule/passes.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/schedule/engine.h"
#include "coordinator/schedule/validator.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> AddTransfers(const Schedule& schedule) {
  if (HasTransfers(schedule)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddTransfers: schedule \"", schedule.name, "\" already has transfers"));
  }
  PT_RETURN_IF_ERROR(ValidateSchedule(schedule));
  Schedule out = schedule;
  const int last = schedule.num_stages - 1;
  auto cross = [&](int a, int b) { return schedule.WorkerOf(a) != schedule.WorkerOf(b); };
  for (int w = 0; w < schedule.num_workers; ++w) {
    const auto& in = schedule.worker_actions[w];
    auto& list = out.worker_actions[w];
    list.clear();
    list.reserve(in.size() * 3);
    for (const Action& a : in) {
      const int s = a.stage, i = a.microbatch;
      if (a.kind == ActionKind::kF) {
        if (s > 0 && cross(s - 1, s)) list.push_back({ActionKind::kRecvAct, s, i});
        list.push_back(a);
        if (s < last && cross(s, s + 1)) list.push_back({ActionKind::kSendAct, s, i});
      } else if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) {
        if (s < last && cross(s, s + 1)) list.push_back({ActionKind::kRecvGrad, s, i});
        list.push_back(a);
        if (s > 0 && cross(s - 1, s)) list.push_back({ActionKind::kSendGrad, s, i});
      } else {
        list.push_back(a);
      }
    }
  }
  PT_RETURN_IF_ERROR(ValidateSchedule(out));
  return out;
}

}  // namespace pipetrain::schedule
