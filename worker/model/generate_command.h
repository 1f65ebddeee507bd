// `pipetrain generate` (the pipetrain-generate binary; docs/export.md): loads a model exported
// by `pipetrain export`, encodes each prompt with the model's tokenizer, samples a completion
// (text_generator.h) and prints it. Only the flag parsing is in generate_main.cc.
//
// Output: for each prompt, one line: the prompt followed by the completion, or the completion
// alone with `completion_only` (what `pipetrain local` reads).
//
// Thread-safety: a free function.
#ifndef PIPETRAIN_WORKER_MODEL_GENERATE_COMMAND_H_
#define PIPETRAIN_WORKER_MODEL_GENERATE_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/model/text_generator.h"

namespace pipetrain::model {

struct GenerateRequest {
  std::string weights;               // --weights: a .safetensors file from `pipetrain export`
  std::vector<std::string> prompts;  // --prompt (one or more)
  GenerationOptions options;         // --max-tokens, --temperature, --seed
  std::string tokenizer;             // --tokenizer: SentencePiece model; default beside weights
  std::string data_tool;             // --data-tool: the pipetrain-data binary; default: found
  bool completion_only = false;      // --completion-only
};

// InvalidArgument or NotFound naming the flag for bad input; other errors as they come.
absl::Status GenerateCommand(const GenerateRequest& request, std::ostream& out);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_WORKER_MODEL_GENERATE_COMMAND_H_
