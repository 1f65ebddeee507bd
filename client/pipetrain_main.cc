// `pipetrain`: the client CLI. Only flag parsing lives here (all CLI11 use is in this file);
// each subcommand's logic is a library (plan_command.h, ...). Later issues add `submit`,
// `status`, ... as further subcommands.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "client/plan_command.h"
#include "coordinator/schedule/generator.h"

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
    // Keep stdout a clean document for svg/trace/csv/json (pipe it to a file); the
    // predictions still reach the terminal.
    (options.format == "ascii" ? std::cout : std::cerr) << result->summary;
    return 0;
  }
  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  file << result->document;
  file.close();
  if (!file) {
    std::cerr << "pipetrain plan: cannot write --output file \"" << output << "\"\n";
    return 1;
  }
  std::cout << result->summary << "wrote " << options.format << " to " << output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pipetrain: pipeline-parallel training service client"};
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
  plan_cmd->add_option("--workers,-p", plan.workers, "Pipeline workers p (>= 1)")->required();
  plan_cmd->add_option("--microbatches,-m", plan.microbatches, "Microbatches per step m (>= 1)")
      ->required();
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
  plan_cmd->add_option("--format", plan.format, "Output: ascii, svg, trace, csv or json")
      ->capture_default_str();
  plan_cmd->add_option("--output,-o", output, "Write the rendering to this file");
  plan_cmd->footer(
      "Units: time in the unit of --costs; memory in units of one microbatch's activations "
      "for a worker's whole share of layers (1F1B's worker 0 peaks at p).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "pipetrain: " << e.what() << " (run with --help for usage)\n";
    return 2;
  }
  if (plan_cmd->parsed()) return RunPlanCommand(plan, output);
  return 2;
}
