#include "schedule/schedule.h"

#include <utility>

namespace pipetrain::schedule {

std::vector<int> LoopPlacement(int num_workers, int chunks_per_worker) {
  std::vector<int> placement(num_workers * chunks_per_worker);
  for (int s = 0; s < static_cast<int>(placement.size()); ++s) placement[s] = s % num_workers;
  return placement;
}

std::vector<int> VPlacement(int num_workers) {
  std::vector<int> placement(2 * num_workers);
  for (int s = 0; s < 2 * num_workers; ++s) {
    placement[s] = s < num_workers ? s : 2 * num_workers - 1 - s;
  }
  return placement;
}

Schedule MakeEmptySchedule(std::string name, int num_workers, int num_microbatches,
                           std::vector<int> stage_to_worker) {
  Schedule schedule;
  schedule.name = std::move(name);
  schedule.num_workers = num_workers;
  schedule.num_stages = static_cast<int>(stage_to_worker.size());
  schedule.num_microbatches = num_microbatches;
  schedule.stage_to_worker = std::move(stage_to_worker);
  schedule.worker_actions.resize(num_workers);
  return schedule;
}

}  // namespace pipetrain::schedule
