// PlaceRanks: which acquired worker runs which job rank, so that each pipeline's neighbours are
// close. A job of d replicas x p pipeline ranks sends activations and gradients between
// neighbouring pipeline ranks at every microbatch, while the replicas exchange each stage's
// gradient sum once per step (docs/data_parallel.md), so a pipeline should sit on as few zones
// and hosts as possible with consecutive ranks next to each other, and only the replicas should
// span the distance. Workers report `host` (their machine) and optionally `zone` (a zone or
// rack label, `pipetrain-worker --zone`) at registration.
//
// Placement, replica by replica (job ranks q * p .. q * p + p - 1): the replica takes its p
// workers from one host if some host still has p free (the fullest-fitting: the fewest free
// workers that are enough, so bigger hosts stay whole for later replicas), else from one zone
// if some zone has p (again the fewest that are enough, taking its hosts fullest first), else
// from the zones with the most free workers, fullest hosts first. Within a replica the workers
// are ordered by zone, then host, so consecutive ranks share a host wherever they can. Ties
// keep the registry's order (deterministic).
//
// Thread-safety: pure function.
#ifndef PIPETRAIN_COORDINATOR_PLACEMENT_H_
#define PIPETRAIN_COORDINATOR_PLACEMENT_H_

#include <string>
#include <vector>

namespace pipetrain::coordinator {

struct WorkerLocation {
  std::string zone;  // empty: unknown (all unknown zones are one)
  std::string host;  // empty: unknown (each such worker is a host of its own)
};

// A permutation of 0..workers.size()-1: entry r is the index (into `workers`) of the worker that
// runs job rank r. The identity unless `pipeline_ranks` (p) is at least 2 and divides
// workers.size().
std::vector<int> PlaceRanks(const std::vector<WorkerLocation>& workers, int pipeline_ranks);

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_PLACEMENT_H_
