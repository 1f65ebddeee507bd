// `pipetrain`: the client CLI. Only flag parsing lives here (all of this binary's CLI11 use is in
// this file; `pipetrain data` is pipetrain_data_main.cc's);
// each subcommand's logic is a library: plan_command.h (offline planning), job_commands.h
// (submit, status, list, cancel, watch against a coordinator), trace_command.h (a step's measured
// timeline), local_command.h (a whole local cluster), export_command.h (`pipetrain export`),
// data_tool.h (`pipetrain data` and `pipetrain generate`, which run the pipetrain-data and
// pipetrain-generate binaries). Exit codes: 0 ok, 1 runtime failure, 2 bad input, 3 job failed,
// 4 job cancelled.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "client/data_tool.h"
#include "client/default_job.h"
#include "client/export_command.h"
#include "client/job_commands.h"
#include "client/job_file.h"
#include "client/local_command.h"
#include "client/plan_command.h"
#include "client/report_command.h"
#include "client/trace_command.h"
#include "common/command_line.h"
#include "common/heap_policy.h"
#include "common/secret.h"
#include "common/version.h"
#include "schedule/generator.h"

namespace {

// Exit codes: 0 ok, 1 runtime failure (e.g. cannot write the output), 2 bad input.
int RunPlanCommand(const pipetrain::client::PlanOptions& options, const std::string& output) {
  auto result = pipetrain::client::RunPlan(options);
  if (!result.ok()) {
    std::cerr << "pipetrain plan: " << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (output.empty()) {
    std::cout << result->document;
    // Keep stdout a clean document for svg/trace/csv/json/plan-file (pipe it to a file); the
    // predictions still reach the terminal.
    (result->format == "ascii" ? std::cout : std::cerr) << result->summary
                                                         << result->explanation;
    return 0;
  }
  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  file << result->document;
  file.close();
  if (!file) {
    std::cerr << "pipetrain plan: cannot write --output file \"" << output << "\"\n";
    return 1;
  }
  std::cout << result->summary << result->explanation << "wrote " << result->format << " to "
            << output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pipetrain::KeepFreedMemoryInHeap();  // `plan` builds and drops plans of megabytes
  CLI::App app{"pipetrain: pipeline-parallel training service client"};
  app.set_version_flag("--version", pipetrain::VersionLine("pipetrain"));
  app.footer(
      "Exit codes: 0 success; 1 runtime failure (e.g. the coordinator cannot be reached); 2 bad "
      "input (a bad job file or flag, an unknown job id); 3 the watched job FAILED; 4 it was "
      "CANCELLED (or interrupted).");
  app.require_subcommand(1);
  pipetrain::client::PlanOptions plan;
  std::string output;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan", "Generate a pipeline schedule offline, validate and simulate it, and print it");
  plan_cmd
      ->add_option(
          "--schedule", plan.schedule,
          "Schedule name, one of: " + absl::StrJoin(pipetrain::schedule::GeneratorNames(), ", "))
      ->capture_default_str();
  plan_cmd->add_option("--workers,-p", plan.workers,
                       "Pipeline workers p (>= 1); with --job: N workers to split into "
                       "data-parallel replicas x pipeline ranks (the fastest split is planned; "
                       "--explain lists every split)");
  plan_cmd->add_option("--microbatches,-m", plan.microbatches,
                       "Microbatches per step m (>= 1; without --job)");
  plan_cmd->add_option("--from-csv", plan.csv_path,
                       "Validate, simulate (with --costs, --comm) and render a schedule in PyTorch "
                       "pipelining's CSV format (one row per worker: 0F0,0F1,0I0,0W0,...)");
  plan_cmd->add_option("--job", plan.job_path,
                       "Plan this job file (YAML or JSON) as the coordinator would, with the "
                       "model's analytic costs; the default --format is then plan-file, which "
                       "`pipetrain-worker --plan FILE --rank R` runs without a coordinator");
  plan_cmd->add_option("--addresses", plan.addresses,
                       "Plan file: every rank's host:port, comma-separated, by rank (default "
                       "127.0.0.1:<base-port + rank>)");
  plan_cmd->add_option("--base-port", plan.base_port, "Plan file: rank r listens on this + r")
      ->capture_default_str();
  plan_cmd->add_option("--job-id", plan.job_id,
                       "Plan file: the id tying the ranks together (runs sharing a host need "
                       "different ids)")
      ->capture_default_str();
  plan_cmd->add_option("--chunks,-v", plan.chunks,
                       "Chunks (virtual stages) per worker; 0 = the schedule's default");
  plan_cmd
      ->add_option("--costs", plan.costs,
                   "Times of F,B,W for ONE microbatch over a worker's WHOLE share of layers "
                   "(a schedule with two chunks per worker charges each chunk half)")
      ->capture_default_str();
  plan_cmd->add_option("--comm", plan.comm,
                       "Time of one activation/gradient transfer between workers (same unit "
                       "as --costs)");
  plan_cmd->add_option("--memory-budget", plan.memory_budget,
                       "Peak activation memory per worker, in units of one microbatch's "
                       "activations for a worker's whole share of layers; 0 = default");
  plan_cmd->add_option("--format", plan.format,
                       "Output: ascii, svg, trace, csv, json, or plan-file (with --job); "
                       "default ascii, or plan-file with --job");
  plan_cmd->add_option("--output,-o", output, "Write the rendering to this file");
  plan_cmd->add_option("--offload", plan.offload,
                       "Activation offload on the named schedule: none, half, full, selective "
                       "(selective: until --memory-budget is met)")
      ->capture_default_str();
  plan_cmd->add_option("--offload-ratio", plan.offload_ratio,
                       "Host link as the offload ratio k: one chunk's copy time out and back "
                       "over its F+B+W time (PipeOffload's k; <= 1 hides a full offload); "
                       "0 = no link. With --schedule auto and --memory-budget, "
                       "auto also considers offload plans");
  plan_cmd->add_option("--device", plan.device,
                       "Compute k from a device preset (a100, h100, h200) and --hidden, "
                       "--seq-len; with --job: plan the job's analytic costs at the preset's "
                       "sustained GEMM rate and host link (default: a CPU core's 30 GFLOP/s)");
  plan_cmd->add_option("--hidden", plan.hidden, "Model hidden size h (with --device)");
  plan_cmd->add_option("--seq-len", plan.seq_len, "Sequence length s (with --device)");
  plan_cmd->add_option("--link-bytes-per-s", plan.link_bytes_per_s,
                       "Measured host link bandwidth, overrides the --device preset's");
  plan_cmd->add_option("--host-cores", plan.host_cores,
                       "With --job: the job's workers (data_parallel x num_workers CPU processes) "
                       "share one host of this many cores, as the local cluster does; the "
                       "prediction and the --workers split search then simulate them sharing "
                       "the cores (0: a device per worker)");
  plan_cmd->add_flag("--search-microbatch-size", plan.search_microbatch_size,
                     "With --job, --workers and schedule auto: also try every microbatch size "
                     "dividing the global batch (off by default: with the measured "
                     "per-action overhead it no longer picks the smallest sizes, but its "
                     "choice was not measured faster than the job's own size; "
                     "docs/data_parallel.md)");
  plan_cmd->add_flag("--explain", plan.explain,
                     "Explain the choice: auto's candidates table (with offload plans) and why "
                     "the chosen one won; offload statistics for a named schedule");
  plan_cmd->footer(
      "Units: time in the unit of --costs; memory in units of one microbatch's activations "
      "for a worker's whole share of layers (1F1B's worker 0 peaks at p).");
  // Job commands against a running coordinator.
  pipetrain::client::JobCommandOptions job_options;
  std::string job_file, job_id, state_filter, token_file;
  bool submit_watch = false, no_progress = false;
  auto add_common = [&](CLI::App* cmd, bool read_command) {
    cmd->add_option("--coordinator", job_options.coordinator, "Coordinator address host:port")
        ->envname("PIPETRAIN_COORDINATOR")
        ->capture_default_str();
    // Not only on the command line, where `ps` and shell history show it.
    cmd->add_option("--token", job_options.token, "Bearer token, if the coordinator needs one")
        ->envname("PIPETRAIN_TOKEN");
    cmd->add_option("--token-file", token_file,
                    "File holding the bearer token (instead of --token / PIPETRAIN_TOKEN)");
    cmd->add_option("--tls-ca", job_options.tls.ca_file,
                    "CA certificate (PEM) to verify a TLS coordinator; enables TLS");
    cmd->add_option("--tls-cert", job_options.tls.cert_file,
                    "Client certificate (PEM) for mutual TLS (with --tls-key)");
    cmd->add_option("--tls-key", job_options.tls.key_file,
                    "Client private key (PEM) for mutual TLS (with --tls-cert)");
    if (read_command) {
      cmd->add_flag("--json", job_options.json,
                    "Machine-readable output: stdout holds only protobuf JSON (watch and "
                    "submit --watch: one JobEvent per line, then the final job on one line); "
                    "everything else goes to stderr");
    }
  };
  CLI::App* submit_cmd = app.add_subcommand("submit", "Submit a job file (YAML or JSON JobSpec)");
  submit_cmd->add_option("job_file", job_file, "Job spec file (.yaml or .json)")->required();
  submit_cmd->add_flag("--watch,-w", submit_watch, "Follow the job to its end");
  add_common(submit_cmd, true);
  // The dry run through the coordinator: plan --job FILE --dry-run is validate FILE.
  bool plan_dry_run = false;
  plan_cmd
      ->add_flag("--dry-run", plan_dry_run,
                 "With --job: plan on the coordinator (its PlanJob RPC: the same validation and "
                 "planning as submit, with its workers' measurements) and submit nothing, as "
                 "`pipetrain validate` does; the options below --job do not apply")
      ->needs("--job");
  add_common(plan_cmd, true);
  CLI::App* validate_cmd = app.add_subcommand(
      "validate",
      "Check and plan a job file on the coordinator without submitting it (a dry run: the "
      "same validation and planning as submit)");
  validate_cmd->add_option("job_file", job_file, "Job spec file (.yaml or .json)")->required();
  add_common(validate_cmd, true);
  CLI::App* workers_cmd = app.add_subcommand(
      "workers", "List the coordinator's registered workers: id, state, job, device, host");
  add_common(workers_cmd, true);
  CLI::App* status_cmd =
      app.add_subcommand("status", "Show a job: state, plan, predicted vs measured");
  status_cmd->add_option("job_id", job_id, "Job id, e.g. job-000001")->required();
  add_common(status_cmd, true);
  CLI::App* list_cmd = app.add_subcommand("list", "List jobs");
  list_cmd->add_option("--state", state_filter,
                       "Only jobs in this state (queued, running, succeeded, failed, ...)");
  add_common(list_cmd, true);
  CLI::App* cancel_cmd = app.add_subcommand("cancel", "Cancel a job");
  cancel_cmd->add_option("job_id", job_id, "Job id")->required();
  add_common(cancel_cmd, true);
  CLI::App* watch_cmd =
      app.add_subcommand("watch", "Follow a job with a live progress bar until it ends");
  watch_cmd->add_option("job_id", job_id, "Job id")->required();
  watch_cmd->add_flag("--no-progress", no_progress, "Print lines instead of a progress bar");
  add_common(watch_cmd, true);
  int trace_step = -1;
  std::string trace_output;
  CLI::App* trace_cmd = app.add_subcommand(
      "trace", "Download a step's measured timeline as a Chrome trace (Perfetto)");
  trace_cmd->add_option("job_id", job_id, "Job id")->required();
  trace_cmd->add_option("--step", trace_step,
                        "Step to fetch; -1 = the newest kept (the coordinator keeps the first "
                        "steps and the newest ones)")
      ->capture_default_str();
  trace_cmd->add_option("--output,-o", trace_output, "Write the trace to this file");
  add_common(trace_cmd, true);
  std::string report_output;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "Predicted vs measured timelines and per-worker memory of a step, as an SVG");
  report_cmd->add_option("job_id", job_id, "Job id")->required();
  report_cmd->add_option("--step", trace_step, "Step; -1 = the newest kept")->capture_default_str();
  report_cmd->add_option("--output,-o", report_output, "SVG file (default <job>-step-<N>.svg)");
  double replay_host_cores = -1;
  report_cmd
      ->add_option("--replay-host-cores", replay_host_cores,
                   "Also replay the step with its own costs (each stage's F, B, W at their "
                   "measured CPU time, the measured hop between ranks), the ranks sharing this "
                   "many cores of one host, as `pipetrain local` runs them (0: a device per "
                   "rank): a replay that matches the measured step says the plan's costs were "
                   "the miss")
      ->check(CLI::NonNegativeNumber);
  add_common(report_cmd, false);

  int64_t export_step = 0;
  std::string export_output;
  CLI::App* export_cmd = app.add_subcommand(
      "export",
      "Write a job's checkpoint as one safetensors file with GPT-2 tensor names "
      "(docs/export.md); the checkpoint directory must be readable here");
  export_cmd->add_option("job_id", job_id, "Job id")->required();
  export_cmd->add_option("--step", export_step,
                         "Checkpoint step to export (>= 1); default: the newest complete one");
  export_cmd->add_option("--output,-o", export_output, "The .safetensors file to write")
      ->required();
  add_common(export_cmd, false);

  // A whole local cluster.
  pipetrain::client::LocalOptions local;
  bool print_default_job = false;
  CLI::App* local_cmd = app.add_subcommand(
      "local",
      "Start a coordinator and CPU workers on 127.0.0.1, run a job (default: the embedded "
      "addition task), watch it, summarise, shut down");
  local_cmd->add_option("--job", local.job_file, "Job spec file instead of the default job");
  local_cmd->add_option("--schedule", local.schedule, "Override the job's schedule");
  local_cmd->add_option("--workers", local.workers,
                        "Override the job's pipeline ranks (parallelism.num_workers; the local "
                        "cluster starts data_parallel x that many worker processes)");
  local_cmd->add_option("--steps", local.steps, "Override the job's number of steps");
  local_cmd->add_option("--dir", local.dir, "Directory for logs and the job database");
  local_cmd->add_flag("--emulate", local.emulate,
                      "EMULATED worker compute (sleeps for predicted times; demos only)");
  local_cmd->add_flag("--no-progress", no_progress, "Print lines instead of a progress bar");
  local_cmd->add_flag("--print-default-job", print_default_job,
                      "Print the default job as YAML with every field and its default (a template for "
                      "job files; docs/job-file.md describes each) and exit");
  // Training data: `pipetrain data prepare ...` is the pipetrain-data binary (data_tool.h), which
  // parses its own flags (and answers --help).
  CLI::App* data_cmd = app.add_subcommand(
      "data",
      "Training data for the \"tokens\" source: `pipetrain data prepare --input corpus.txt "
      "--vocab-size N --output DIR` trains a tokenizer and encodes the corpus (docs/data.md; "
      "`pipetrain data prepare --help`)");
  data_cmd->prefix_command();
  data_cmd->set_help_flag();
  // Sampling from an exported model: the pipetrain-generate binary (a worker-side tool: it
  // computes), which parses its own flags and answers --help.
  CLI::App* generate_cmd = app.add_subcommand(
      "generate",
      "Sample text from a model written by `pipetrain export`: `pipetrain generate --weights "
      "model.safetensors --prompt TEXT [--max-tokens N --temperature T --seed S]` "
      "(docs/export.md; `pipetrain generate --help`)");
  generate_cmd->prefix_command();
  generate_cmd->set_help_flag();
  if (std::optional<int> code =
          pipetrain::ParseCommandLine(app, argc, argv, "pipetrain")) {
    return *code;
  }
  if (plan_cmd->parsed() && !plan_dry_run) return RunPlanCommand(plan, output);
  if (data_cmd->parsed()) {
    const absl::Status exec = pipetrain::client::ExecDataTool(data_cmd->remaining());
    std::cerr << "pipetrain data: " << exec.message() << "\n";  // only on failure
    return 1;
  }
  if (generate_cmd->parsed()) {
    const absl::Status exec =
        pipetrain::client::ExecTool("pipetrain-generate", generate_cmd->remaining());
    std::cerr << "pipetrain generate: " << exec.message() << "\n";  // only on failure
    return 1;
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = pipetrain::LoadSecret(token_file, "", "--token-file");
    if (!token.ok()) {
      std::cerr << "pipetrain: " << token.status().message() << "\n";
      return 2;
    }
    job_options.token = *std::move(token);
  }
  job_options.progress = !no_progress;
  local.progress = !no_progress;
  absl::Status status;
  const char* name = "pipetrain";
  if (submit_cmd->parsed()) {
    name = "pipetrain submit";
    status =
        pipetrain::client::SubmitCommand(job_options, job_file, submit_watch, std::cout, std::cerr);
  } else if (validate_cmd->parsed()) {
    name = "pipetrain validate";
    status = pipetrain::client::ValidateCommand(job_options, job_file, std::cout);
  } else if (plan_cmd->parsed()) {  // --dry-run
    name = "pipetrain plan --dry-run";
    status = pipetrain::client::ValidateCommand(job_options, plan.job_path, std::cout);
  } else if (workers_cmd->parsed()) {
    name = "pipetrain workers";
    status = pipetrain::client::WorkersCommand(job_options, std::cout);
  } else if (status_cmd->parsed()) {
    name = "pipetrain status";
    status = pipetrain::client::StatusCommand(job_options, job_id, std::cout);
  } else if (list_cmd->parsed()) {
    name = "pipetrain list";
    status = pipetrain::client::ListCommand(job_options, state_filter, std::cout);
  } else if (cancel_cmd->parsed()) {
    name = "pipetrain cancel";
    status = pipetrain::client::CancelCommand(job_options, job_id, std::cout);
  } else if (watch_cmd->parsed()) {
    name = "pipetrain watch";
    status = pipetrain::client::WatchCommand(job_options, job_id, std::cout, std::cerr);
  } else if (report_cmd->parsed()) {
    name = "pipetrain report";
    status = pipetrain::client::ReportCommand(
        job_options, job_id, trace_step, report_output, std::cout,
        replay_host_cores >= 0 ? std::optional<double>(replay_host_cores) : std::nullopt);
  } else if (trace_cmd->parsed()) {
    name = "pipetrain trace";
    status = pipetrain::client::TraceCommand(job_options, job_id, trace_step, trace_output,
                                             std::cout, std::cerr);
  } else if (export_cmd->parsed()) {
    name = "pipetrain export";
    status = pipetrain::client::ExportCommand(job_options, job_id, export_step, export_output,
                                              std::cout);
  } else if (local_cmd->parsed()) {
    if (print_default_job) {
      std::cout << pipetrain::client::JobSpecToYamlWithEveryField(
          pipetrain::client::DefaultJobSpec());
      return 0;
    }
    name = "pipetrain local";
    // The local command waits for Ctrl-C itself: block the signals before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    status = pipetrain::client::LocalCommand(local, std::cout, std::cerr);
  }
  if (!status.ok()) std::cerr << name << ": " << status.message() << "\n";
  return pipetrain::client::ExitCodeFor(status);
}
