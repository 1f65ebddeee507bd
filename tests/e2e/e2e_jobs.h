// Jobs shared by the end-to-end tests, and the oracle they are checked against: the
// single-process reference trainer's losses for the same spec.
#ifndef PIPETRAIN_TESTS_E2E_E2E_JOBS_H_
#define PIPETRAIN_TESTS_E2E_E2E_JOBS_H_

#include <map>
#include <string>
#include <vector>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::testing {

// A small GPT (2p layers, hidden 32) on the default addition task, m microbatches of 4.
v1::JobSpec SmallJob(const std::string& schedule, int workers, int microbatches, int steps);
// Per-step losses of the reference trainer (whole model, one process) for `spec`.
std::vector<double> ReferenceLosses(const v1::JobSpec& spec);

// `spec` with the full training recipe: 1 warmup step, cosine decay to 0.1 x the peak, weight
// decay 0.05 on every group (embeddings, norms and biases too).
v1::JobSpec WithRecipe(v1::JobSpec spec);

// The reference trainer's run of `spec` (from model.init_from's weights when it is set):
// per-step losses, whether each step's update was skipped, and every parameter value of the
// whole model at the end (parameters() order).
// When the spec evaluates (eval.interval_steps > 0), also the validation loss of every pass:
// completed steps -> ReferenceTrainer::Validate on the job's held-out data.
struct ReferenceRun {
  std::vector<double> losses;
  std::vector<bool> skipped;
  std::vector<double> grad_norms;  // global gradient norm per step, before clipping
  std::vector<bool> clipped;
  std::vector<std::vector<float>> weights;
  std::map<int, double> validation;
};
ReferenceRun RunReference(const v1::JobSpec& spec);

// `spec` with training.optimizer.clip_grad_norm halfway between the smallest and the largest
// gradient norm of its unclipped reference run, so that some steps are clipped and others not
// (callers assert it from the clipped run).
v1::JobSpec WithClipping(v1::JobSpec spec);

// Every parameter value, stage by stage in model order, of the checkpoint step-`step` the
// job's ranks wrote under `dir` (stage s is the s-th of `num_stages` even splits). Fails the
// test (empty result) if a file is missing or does not load.
std::vector<std::vector<float>> CheckpointWeights(const v1::JobSpec& spec, const std::string& dir,
                                                  int step, int num_stages);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_E2E_JOBS_H_
