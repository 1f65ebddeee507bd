// `pipetrain plan`: generate a schedule offline, validate and simulate it, and render it; or,
// with a job file, plan the job as the coordinator would and write the plan file that
// `pipetrain-worker --plan` runs (planner/plan_file.h). The options struct is filled by the CLI
// parser (pipetrain_main.cc); this file has no CLI11.
//
// Thread-safety: pure function (file writing is the caller's job).
#ifndef PIPETRAIN_CLIENT_PLAN_COMMAND_H_
#define PIPETRAIN_CLIENT_PLAN_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"

namespace pipetrain::client {

struct PlanOptions {
  std::string schedule = "1f1b";
  int workers = -1;       // -1: not given (required without job_path)
  int microbatches = -1;
  int chunks = 0;               // 0 = the schedule's default
  std::string costs = "1,1,1";  // "f,b,w" for one microbatch over a worker's whole share
  double comm = 0.0;
  double memory_budget = 0.0;  // units; 0 = the schedule's default limit
  std::string format;  // empty: ascii, or plan-file with job_path
  // Host link as the offload ratio k (one chunk's copy time each way / its f+b+w); 0 = none.
  // Or from a device preset and the model shape: k = 10/(3(6h+s)) FLOP/s / link bytes/s.
  double offload_ratio = 0.0;
  std::string device;  // "a100", "h100", "h200" (with hidden and seq_len); empty = none
  int hidden = 0;
  int seq_len = 0;
  double link_bytes_per_s = 0.0;  // measured link, overrides the preset's
  // Offload pass on the named schedule: none, half, full, selective (needs --memory-budget).
  // With --schedule auto the planner considers offload itself when a link is given.
  std::string offload = "none";
  bool explain = false;  // auto: the candidates table and why the chosen plan won
  // A job file: plan it with planner::PlanJob (analytic costs) instead of the abstract costs
  // above; --workers, --microbatches and the cost flags then come from the job.
  std::string job_path;
  // With job_path: every worker of the job (d x p) on one host with this many cores, sharing
  // them (planner/shared_host.h; the local cluster's case); 0: a device per worker.
  int host_cores = 0;
  // With --job, --workers and schedule auto: search the microbatch size too (analytic costs
  // favour small microbatches; planner.h's search_microbatch_size).
  bool search_microbatch_size = false;
  // A schedule in PyTorch pipelining's CSV format (one row per worker, e.g. `0F0,0F1,0I0,0W0`):
  // validated, simulated with the cost flags above and rendered instead of a generated one.
  std::string csv_path;
  std::string addresses;  // plan file: host:port per rank, comma-separated; empty: base_port
  int base_port = 29500;
  std::string job_id = "plan-file";
};

struct PlanOutput {
  std::string format;    // the format the document is in
  std::string document;  // the rendering in the requested format
  std::string summary;   // makespan, bubble ratio, peak memory per worker (text lines)
  std::string explanation;  // --explain: candidates table + reasoning (auto), or offload stats
};

// InvalidArgument with a one-line message naming the flag and the allowed values on bad input.
absl::StatusOr<PlanOutput> RunPlan(const PlanOptions& options);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_PLAN_COMMAND_H_
