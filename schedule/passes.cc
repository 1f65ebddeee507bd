#include "schedule/passes.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/engine.h"
#include "schedule/validator.h"

namespace pipetrain::schedule {

absl::StatusOr<Schedule> AddTransfers(const Schedule& schedule) {
  if (HasTransfers(schedule)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddTransfers: schedule \"", schedule.name, "\" already has transfers"));
  }
  // One validation, of the output: an invalid input makes an invalid output. Only what the
  // rewrite itself indexes is checked first.
  const int n_stages = schedule.num_stages;
  if (n_stages < 0 || static_cast<int>(schedule.stage_to_worker.size()) != n_stages ||
      static_cast<int>(schedule.worker_actions.size()) != schedule.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AddTransfers: schedule \"", schedule.name, "\" has ", schedule.stage_to_worker.size(),
        " placements for ", n_stages, " stages and ", schedule.worker_actions.size(),
        " action lists for ", schedule.num_workers, " workers"));
  }
  for (const auto& list : schedule.worker_actions) {
    for (const Action& a : list) {
      if (a.stage < 0 || a.stage >= n_stages) {
        return absl::InvalidArgumentError(absl::StrCat("AddTransfers: ", ToString(a),
                                                       " is outside stages 0..", n_stages - 1));
      }
    }
  }
  // Per stage: whether its edge to the previous / next stage crosses workers.
  std::vector<uint8_t> cross_prev(n_stages, 0), cross_next(n_stages, 0);
  for (int s = 0; s + 1 < n_stages; ++s) {
    cross_next[s] = cross_prev[s + 1] = schedule.WorkerOf(s) != schedule.WorkerOf(s + 1);
  }
  Schedule out;
  out.name = schedule.name;
  out.num_workers = schedule.num_workers;
  out.num_stages = schedule.num_stages;
  out.num_microbatches = schedule.num_microbatches;
  out.stage_to_worker = schedule.stage_to_worker;
  out.forward_only = schedule.forward_only;
  out.worker_actions.resize(schedule.num_workers);
  for (int w = 0; w < schedule.num_workers; ++w) {
    const auto& in = schedule.worker_actions[w];
    size_t size = in.size();
    for (const Action& a : in) {
      if (IsForward(a.kind) || a.kind == ActionKind::kB || a.kind == ActionKind::kBW) {
        size += cross_prev[a.stage] + cross_next[a.stage];
      }
    }
    auto& list = out.worker_actions[w];
    list.reserve(size);
    for (size_t k = 0; k < in.size(); ++k) {
      const Action& a = in[k];
      const int s = a.stage, i = a.microbatch;
      if (a.kind == ActionKind::kOverlapF && k + 1 < in.size() &&
          (in[k + 1].kind == ActionKind::kB || in[k + 1].kind == ActionKind::kBW)) {
        // An overlapped pair runs as one unit: both inputs arrive before it, both outputs
        // leave after it (PyTorch's OVERLAP_F_B).
        const Action& b = in[k + 1];
        if (cross_prev[s]) list.push_back({ActionKind::kRecvAct, s, i});
        if (cross_next[b.stage]) list.push_back({ActionKind::kRecvGrad, b.stage, b.microbatch});
        list.push_back(a);
        list.push_back(b);
        if (cross_next[s]) list.push_back({ActionKind::kSendAct, s, i});
        if (cross_prev[b.stage]) list.push_back({ActionKind::kSendGrad, b.stage, b.microbatch});
        ++k;
      } else if (IsForward(a.kind)) {
        if (cross_prev[s]) list.push_back({ActionKind::kRecvAct, s, i});
        list.push_back(a);
        if (cross_next[s]) list.push_back({ActionKind::kSendAct, s, i});
      } else if (a.kind == ActionKind::kB || a.kind == ActionKind::kBW) {
        if (cross_next[s]) list.push_back({ActionKind::kRecvGrad, s, i});
        list.push_back(a);
        if (cross_prev[s]) list.push_back({ActionKind::kSendGrad, s, i});
      } else {
        list.push_back(a);
      }
    }
  }
  PT_RETURN_IF_ERROR(ValidateSchedule(out));
  return out;
}

}  // namespace pipetrain::schedule
