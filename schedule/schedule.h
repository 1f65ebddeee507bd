// Schedule: a whole pipeline program. The per-worker action lists ARE the schedule; a worker
// executes its list in order every training step. There is no second description of it.
//
// Stages are virtual stages (chunks) in model order: stage 0 holds the first layers, stage
// num_stages-1 the last. `stage_to_worker` places each stage on a worker; a worker may hold
// several stages (interleaved: stage s on worker s % p; V-shape: s and 2p-1-s on worker s).
//
// Thread-safety: value type.
#ifndef PIPETRAIN_SCHEDULE_SCHEDULE_H_
#define PIPETRAIN_SCHEDULE_SCHEDULE_H_

#include <string>
#include <vector>

#include "schedule/action.h"

namespace pipetrain::schedule {

struct Schedule {
  std::string name;            // generator that produced it, e.g. "1f1b"
  int num_workers = 0;         // p
  int num_stages = 0;          // p * v
  int num_microbatches = 0;    // m
  std::vector<int> stage_to_worker;             // size num_stages
  std::vector<std::vector<Action>> worker_actions;  // size num_workers, in execution order
  // A validation plan (forward_only.h): F and activation transfers only; every (stage,
  // microbatch) has exactly one F and no backward.
  bool forward_only = false;

  int WorkerOf(int stage) const { return stage_to_worker[stage]; }
  int ChunksPerWorker() const { return num_workers > 0 ? num_stages / num_workers : 0; }
};

// Placements. Loop: stage s on worker s % p (GPipe, 1F1B, interleaved). V: stage s < p on worker
// s, stage s >= p on worker 2p-1-s (2 chunks per worker; the last worker hands stage p-1 to
// stage p locally).
std::vector<int> LoopPlacement(int num_workers, int chunks_per_worker);
std::vector<int> VPlacement(int num_workers);

// An empty schedule with the placement set and one empty list per worker.
Schedule MakeEmptySchedule(std::string name, int num_workers, int num_microbatches,
                           std::vector<int> stage_to_worker);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_SCHEDULE_H_
