// How a job is shown to people and scripts: the `status` summary (predicted next to measured),
// the live progress line of `watch`, and a loss-curve summary.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_CLIENT_JOB_VIEW_H_
#define PIPETRAIN_CLIENT_JOB_VIEW_H_

#include <string>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::client {

// "RUNNING" for JOB_STATE_RUNNING.
std::string StateName(v1::JobState state);
// Multi-line human summary: identity, state and reason, progress, the plan, checkpoints and
// recoveries (the newest three), and predicted vs measured step time, bubble ratio and peak
// activation memory per worker.
std::string FormatJobStatus(const v1::Job& job);
// One line for `list`.
std::string FormatJobLine(const v1::Job& job);
// One progress line: bar, step/steps, loss, tokens/s, ETA (from the last step time).
std::string FormatProgress(const v1::Job& job, int width = 30);
// The status lines of the job's validation passes (empty when it does not evaluate).
std::string FormatValidation(const v1::Job& job);
// The status lines of the numbers users compare: tokens/s, model FLOP/s and MFU of the last
// step and of the whole job, the peak and where it came from, the last step's learning rate
// (empty before the first step).
std::string FormatThroughput(const v1::Job& job);
// First, lowest and last loss plus a sparkline of the curve.
std::string FormatLossCurve(const v1::Job& job);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_JOB_VIEW_H_
