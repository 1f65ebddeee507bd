#include "worker/model/generate_command.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/exported_model.h"
#include "model/safetensors.h"
#include "worker/model/exported_tokenizer.h"
#include "worker/model/exported_weights.h"

namespace pipetrain::model {

absl::Status GenerateCommand(const GenerateRequest& request, std::ostream& out) {
  if (request.weights.empty()) return absl::InvalidArgumentError("--weights: required");
  if (request.prompts.empty()) return absl::InvalidArgumentError("--prompt: required");
  // Check the options before the (possibly long) load.
  if (request.options.max_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-tokens: ", request.options.max_tokens, " is not allowed; allowed: >= 0"));
  }
  if (!(request.options.temperature >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--temperature: ", request.options.temperature,
                                                   " is not allowed; allowed: >= 0 (0: greedy)"));
  }
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(request.weights);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("--weights: ", file.status().message()));
  }
  absl::StatusOr<GptConfig> config = ConfigFromMetadata(file->metadata());
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--weights: ", request.weights, ": ", config.status().message(),
                     " (is it a file written by `pipetrain export`?)"));
  }
  PT_ASSIGN_OR_RETURN(std::unique_ptr<ExportedTokenizer> tokenizer,
                      ExportedTokenizer::ForModel(*file, request.tokenizer, request.data_tool));
  kernels::CpuBackend backend;
  PT_ASSIGN_OR_RETURN(std::unique_ptr<GptChunk> model,
                      GptChunk::Create(&backend, *config, WholeModel(*config)));
  PT_RETURN_IF_ERROR(LoadExportedWeights(*file, *model, "--weights"));
  for (const std::string& prompt : request.prompts) {
    PT_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, tokenizer->Encode(prompt));
    PT_ASSIGN_OR_RETURN(const std::vector<int32_t> completion,
                        GenerateTokens(*model, ids, request.options));
    PT_ASSIGN_OR_RETURN(const std::string text, tokenizer->Decode(completion));
    out << (request.completion_only ? "" : prompt) << text << "\n";
  }
  return absl::OkStatus();
}

}  // namespace pipetrain::model
