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
// First, lowest and last loss plus a sparkline of the curve.
std::string FormatLossCurve(const v1::Job& job);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_JOB_VIEW_H_
