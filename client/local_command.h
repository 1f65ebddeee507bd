// `pipetrain local`: the whole system on this machine. Starts a coordinator and N CPU workers
// on 127.0.0.1 (LocalCluster), submits a job (the embedded default unless a job file is given),
// watches it with a progress bar, prints the loss curve and the predicted-vs-measured summary,
// exports the trained model (a job without checkpoints gets one after its last step) to
// <dir>/model.safetensors and, for the addition task, shows a few additions it completes next to
// the true sums (model_samples.h), and shuts everything down. Ctrl-C (SIGINT; also SIGTERM, SIGHUP) cancels the job and still
// shuts down cleanly: the result is then CANCELLED (exit code 4).
//
// Thread-safety: call once per process; it takes over SIGINT/SIGTERM/SIGHUP/SIGUSR1 while it
// runs (they must be blocked in all threads beforehand, as pipetrain's main does).
#ifndef PIPETRAIN_CLIENT_LOCAL_COMMAND_H_
#define PIPETRAIN_CLIENT_LOCAL_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace pipetrain::client {

struct LocalOptions {
  std::string job_file;  // empty: the embedded default job
  std::string schedule;  // overrides parallelism.schedule when set
  int workers = 0;       // overrides parallelism.num_workers when > 0
  int steps = 0;         // overrides training.steps when > 0
  bool emulate = false;  // EMULATED compute on the workers (scale demos only)
  std::string dir;       // logs + job database; empty: a fresh temporary directory
  bool progress = true;
};

absl::Status LocalCommand(const LocalOptions& options, std::ostream& out, std::ostream& err);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_LOCAL_COMMAND_H_
