// `pipetrain-generate`, run as `pipetrain generate ...` (the CLI hands it everything after
// `generate`) or on its own: samples text from a model exported by `pipetrain export`
// (worker/model/generate_command.h; docs/export.md). A worker-side binary because it computes
// (CPU backend); SentencePiece tokenizers run in pipetrain-data. Only flag parsing lives here.
// Exit codes: 0 ok, 1 runtime failure, 2 bad input (a flag, an unreadable or foreign file).
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "common/command_line.h"
#include "common/version.h"
#include "worker/model/generate_command.h"

int main(int argc, char** argv) {
  CLI::App app{"pipetrain generate: sample text from an exported model (docs/export.md)"};
  app.name("pipetrain generate");
  app.set_version_flag("--version", pipetrain::VersionLine("pipetrain-generate"));
  pipetrain::model::GenerateRequest request;
  app.add_option("--weights", request.weights,
                 "A .safetensors file written by `pipetrain export`")
      ->required();
  app.add_option("--prompt", request.prompts,
                 "Text to continue; repeat the flag for several prompts (one line each)")
      ->required();
  app.add_option("--max-tokens", request.options.max_tokens, "Tokens to generate (>= 0)")
      ->capture_default_str();
  app.add_option("--temperature", request.options.temperature,
                 "Sampling temperature (>= 0); 0 = greedy (the most likely token)")
      ->capture_default_str();
  app.add_option("--seed", request.options.seed, "Seed of the sampler (temperature > 0)")
      ->capture_default_str();
  app.add_option("--tokenizer", request.tokenizer,
                 "SentencePiece tokenizer.model of a \"tokens\" job's model (default: the "
                 "tokenizer.model beside --weights, which `pipetrain export` writes)");
  app.add_option("--data-tool", request.data_tool,
                 "The pipetrain-data binary that applies SentencePiece tokenizers (default: "
                 "beside this binary, in the build tree, or on PATH)");
  app.add_flag("--completion-only", request.completion_only,
               "Print only the generated text, without the prompt");
  if (std::optional<int> code =
          pipetrain::ParseCommandLine(app, argc, argv, "pipetrain generate")) {
    return *code;
  }
  const absl::Status status = pipetrain::model::GenerateCommand(request, std::cout);
  if (status.ok()) return 0;
  std::cerr << "pipetrain generate: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kNotFound
             ? 2
             : 1;
}
