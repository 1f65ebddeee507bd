// ReplicaReducer: the gradient sum of data parallelism (parallelism.data_parallel d > 1) for
// one worker, i.e. for one pipeline rank of one replica (docs/data_parallel.md).
//
// The step's M microbatches are split into d consecutive blocks of k = M / d; replica q trains
// microbatches q*k .. q*k+k-1 (ModelStageConfig::microbatch_offset). Single-process training
// sums a parameter's gradient over the microbatches as a running sum in microbatch order,
// ((g0 + g1) + g2) + ..., and float addition is not associative, so summing per-replica
// partial sums ((g0 + g1) + (g2 + g3)) would not give its bits. The reduction therefore
// continues one running sum along the replicas, per stage:
//   replica 0     after its last weight-gradient action (W or BW) of stage s, sends its sum
//                 (microbatches 0..k-1) to replica 1;
//   replica q > 0 keeps its own microbatches' gradients buffered (the chunk's ordered
//                 accumulation already does: they wait for microbatch 0), and after its last
//                 weight-gradient action of s receives the sum of microbatches 0..q*k-1,
//                 adds its own in order (GptChunk::ResumeGradientsAt) and sends the sum on to
//                 replica q + 1; the last replica, whose sum covers every microbatch, sends it
//                 to every other replica.
//   end of step   every replica but the last installs that complete sum (FinishStep), before
//                 the tied-embedding exchange and the gradient-norm pass; so clipping, the
//                 skip rule and AdamW see bitwise the single-process gradients on every replica,
//                 and all replicas keep bitwise equal weights.
// Each stage starts its reduction as soon as its own last weight-gradient action is done, so
// stages whose backward ends early overlap their sum with the rest of the cool-down. The price
// of the exact order: a replica q > 0 holds its k microbatches' gradients of each stage until
// the sum before it arrives (k extra gradient copies), and the chain is sequential in d
// (d - 1 hops, then one broadcast); for the small d of one machine that is a few messages of
// the stage's gradient size.
// Losses: replica 0's rank holding the last stage collects every replica's per-microbatch
// losses and reports the step's loss, summed in microbatch order like the reference.
//
// Messages travel over the job's transport (job ranks q * p + s) with the kReplicaGradient and
// kReplicaLoss roles; this worker links to its own pipeline rank in every other replica.
//
// Thread-safety: not thread-safe; driven by the executor's thread.
#ifndef PIPETRAIN_WORKER_RUNTIME_REPLICA_REDUCER_H_
#define PIPETRAIN_WORKER_RUNTIME_REPLICA_REDUCER_H_

#include <cstdint>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/runtime/stage_runner.h"
#include "worker/transport/transport.h"

namespace pipetrain::worker {

// Where one worker sits in a data-parallel job.
struct ReplicaPlace {
  int replica = 0;         // 0..replicas-1
  int replicas = 1;        // d
  int pipeline_rank = 0;   // 0..pipeline_ranks-1
  int pipeline_ranks = 1;  // p
  // The job rank (transport peer id) of `pipeline_rank` in `replica`.
  int JobRank(int of_replica) const { return of_replica * pipeline_ranks + pipeline_rank; }
};

// The job ranks this worker exchanges gradient sums and losses with: its pipeline rank in every
// other replica.
std::vector<int> ReplicaPeers(const ReplicaPlace& place);

// One all-reduce of a stage, measured (for the step's timeline): from the end of the stage's
// last weight-gradient action until its sum was sent on (the wait for the earlier replicas
// included), and the bytes sent.
struct ReduceTiming {
  int stage = 0;
  int64_t start_ns = 0;  // since the step's start
  int64_t end_ns = 0;
  int64_t bytes = 0;
};

class ReplicaReducer {
 public:
  // `stages`: the stages this worker holds; `microbatches_per_replica`: k. Not owned: runner,
  // transport (the job's, with job ranks), clock.
  ReplicaReducer(const ReplicaPlace& place, std::vector<int> stages, int last_stage,
                 int microbatches_per_replica, StageRunner* runner, Transport* transport,
                 absl::Duration recv_timeout, const Clock* clock = Clock::Real());

  const ReplicaPlace& place() const { return place_; }

  // Called before the step's first action.
  void BeginStep(int64_t step_start_ns);
  // After the last weight-gradient action of `stage` in `step` (file comment).
  absl::Status StageDone(int step, int stage);
  // After the step's last action: every held stage must have been reduced; replicas but the
  // last install the complete sums; replica 0 collects the losses.
  absl::Status FinishStep(int step);
  // This step's reductions, in the order they ran.
  const std::vector<ReduceTiming>& timings() const { return timings_; }

 private:
  const ReplicaPlace place_;
  const std::vector<int> stages_;
  const int last_stage_;
  const int k_;
  StageRunner* const runner_;
  Transport* const transport_;
  const absl::Duration recv_timeout_;
  const Clock* const clock_;
  int64_t step_start_ns_ = 0;
  std::set<int> reduced_;  // this step's stages whose StageDone ran
  std::vector<ReduceTiming> timings_;
};

}  // namespace pipetrain::worker

#endif  // PIPETRAIN_WORKER_RUNTIME_REPLICA_REDUCER_H_
