#include "client/model_export.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/crc32.h"
#include "common/mapped_file.h"
#include "common/status_macros.h"
#include "model/checkpoint_layout.h"
#include "model/exported_model.h"
#include "model/job_model.h"
#include "model/safetensors.h"
#include "model/stage_checkpoint_file.h"
#include "model/token_corpus.h"

namespace pipetrain::client {
namespace {

namespace fs = std::filesystem;

// The steps of `dir` with every stage file present, ascending.
std::vector<int64_t> CompleteSteps(const std::string& dir, int num_stages) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.rfind("step-", 0) != 0 || !absl::SimpleAtoi(name.substr(5), &step)) continue;
    bool complete = true;
    for (int s = 0; s < num_stages && complete; ++s) {
      complete = fs::is_regular_file(model::StageCheckpointPath(dir, step, s), ec);
    }
    if (complete) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string StepList(const std::vector<int64_t>& steps) {
  return steps.empty() ? "none" : absl::StrJoin(steps, ", ");
}

// Every tensor name a whole model of `config` has, in model order.
std::vector<std::string> ExpectedNames(const model::GptConfig& config) {
  std::vector<std::string> names = {"wte.weight", "wpe.weight"};
  for (int b = 0; b < config.num_layers; ++b) {
    for (const char* n : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                          "mlp.c_proj.bias"}) {
      names.push_back(absl::StrCat("h.", b, ".", n));
    }
  }
  for (const char* n : {"ln_f.weight", "ln_f.bias"}) names.push_back(n);
  if (!config.tie_embeddings) names.push_back("lm_head.weight");  // tied: the head uses wte
  return names;
}

// Copies the job's tokenizer.model beside `output` (for the "tokens" source, when its data path
// is a `pipetrain data prepare` directory). Returns the copy's path and CRC-32, or an empty path
// when the job has none. An existing different tokenizer.model there is an error, checked
// before anything is written.
struct TokenizerCopy {
  std::string source, destination, contents;
  uint32_t crc = 0;
};
absl::StatusOr<TokenizerCopy> PlanTokenizerCopy(const v1::JobSpec& spec,
                                                const std::string& output) {
  TokenizerCopy copy;
  if (spec.training().data().source() != "tokens") return copy;
  const std::string source = absl::StrCat(spec.training().data().path(), "/",
                                          model::kTokenizerFile);
  std::error_code ec;
  if (!fs::is_regular_file(source, ec)) return copy;
  PT_ASSIGN_OR_RETURN(copy.contents, ReadRegularFile(source, int64_t{1} << 30));
  copy.source = source;
  std::string dir = fs::path(output).parent_path().string();
  copy.destination = (dir.empty() ? std::string(model::kTokenizerFile)
                                  : absl::StrCat(dir, "/", model::kTokenizerFile));
  copy.crc = Crc32(0, copy.contents.data(), copy.contents.size());
  if (fs::exists(copy.destination, ec)) {
    absl::StatusOr<std::string> existing = ReadRegularFile(copy.destination, int64_t{1} << 30);
    if (!existing.ok() || *existing != copy.contents) {
      return absl::FailedPreconditionError(absl::StrCat(
          copy.destination, " exists and is not this job's tokenizer (", source,
          "); export into another directory (-o) or remove it"));
    }
  }
  return copy;
}

}  // namespace

absl::StatusOr<ExportResult> ExportCheckpoint(const ExportRequest& request) {
  const v1::JobSpec& spec = request.spec;
  const std::string& dir = spec.checkpoint().dir();
  const std::string job = request.job_id.empty() ? "the job" : request.job_id;
  if (dir.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        job, " has no checkpoint.dir, so there is nothing to export (set checkpoint.dir and "
             "checkpoint.interval_steps in the job file)"));
  }
  int num_stages = request.num_stages;
  absl::StatusOr<model::CheckpointManifest> manifest = model::ReadCheckpointManifest(dir);
  if (num_stages <= 0) {
    if (!manifest.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint.dir ", dir, ": the number of stages is unknown: ", manifest.status().message()));
    }
    num_stages = manifest->num_stages;
  }
  const std::vector<int64_t> complete = CompleteSteps(dir, num_stages);
  int64_t step = request.step;
  if (step == 0) {
    if (manifest.ok() && manifest->num_stages == num_stages) {
      step = manifest->step;
    } else if (!complete.empty()) {
      step = complete.back();
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint.dir ", dir, " holds no complete checkpoint of ", job, " (", num_stages,
          " stages)"));
    }
  } else if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--step: ", step, " is not allowed; allowed: "
                                                   ">= 1 (a checkpoint step), or unset"));
  }
  std::error_code ec;
  if (!fs::is_directory(model::CheckpointStepDir(dir, step), ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": ", model::CheckpointStepDir(dir, step),
        " does not exist; complete checkpoints: ", StepList(complete)));
  }

  PT_ASSIGN_OR_RETURN(const model::GptConfig config, model::ModelConfig(spec));
  std::vector<std::shared_ptr<model::StageCheckpointFile>> stages;
  for (int s = 0; s < num_stages; ++s) {
    const std::string path = model::StageCheckpointPath(dir, step, s);
    if (!fs::is_regular_file(path, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", step, " is incomplete: ", path, " does not exist (a rank did not finish "
          "writing it); complete checkpoints: ", StepList(complete)));
    }
    absl::StatusOr<model::StageCheckpointFile> file = model::StageCheckpointFile::Open(path);
    if (!file.ok()) {
      return absl::Status(file.status().code(),
                          absl::StrCat("step ", step, ": ", file.status().message()));
    }
    if (model::StageCheckpointModelFields(file->config(), file->spec()) !=
        model::StageCheckpointModelFields(config, file->spec())) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " holds model ", file->config().DebugString(), ", the job's model is ",
          config.DebugString()));
    }
    if (file->optimizer_step() != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " holds the state after ", file->optimizer_step(), " steps, not ", step));
    }
    stages.push_back(std::make_shared<model::StageCheckpointFile>(*std::move(file)));
  }

  std::vector<model::SafetensorsOutput> tensors;
  std::set<std::string> written;
  ExportResult result;
  result.step = step;
  for (const auto& stage : stages) {
    for (const model::StageCheckpointFile::Parameter& p : stage->parameters()) {
      PT_ASSIGN_OR_RETURN(const model::ExportedTensor exported,
                          model::ExportedTensorFor(config, p.global_layer, p.name));
      // A tied model's last stage holds a copy of wte for its head, bitwise the embedding's
      // (worker/model/lm_head.cc): written once, as GPT-2 files do.
      if (config.tie_embeddings && exported.name == "wte.weight" &&
          written.count(exported.name) > 0) {
        continue;
      }
      if (!written.insert(exported.name).second) {
        return absl::FailedPreconditionError(absl::StrCat(
            "step ", step, ": ", exported.name, " appears in more than one stage file (",
            stage->path(), ")"));
      }
      const model::StageCheckpointFile* file = stage.get();
      const model::StageCheckpointFile::Parameter* param = &p;
      model::SafetensorsOutput out;
      out.name = exported.name;
      out.shape = model::ExportedShape(exported, p.shape);
      const bool transposed = exported.transposed && p.shape.size() == 2;
      out.values = [file, param, transposed]() -> absl::StatusOr<std::vector<float>> {
        std::vector<float> v = file->Read(*param, model::StageCheckpointFile::Part::kValue);
        if (transposed) return model::Transposed(v, param->shape[0], param->shape[1]);
        return v;
      };
      result.parameters += p.numel;
      tensors.push_back(std::move(out));
    }
  }
  for (const std::string& name : ExpectedNames(config)) {
    if (written.count(name) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", step, " is incomplete: no stage file holds ", name, " (", num_stages,
          " stages in ", model::CheckpointStepDir(dir, step), ")"));
    }
  }
  result.tensors = static_cast<int64_t>(tensors.size());

  PT_ASSIGN_OR_RETURN(const TokenizerCopy tokenizer, PlanTokenizerCopy(spec, request.output));
  std::map<std::string, std::string> metadata = model::ExportMetadata(config, spec);
  metadata[model::kMetaStep] = absl::StrCat(step);
  if (!request.job_id.empty()) metadata[model::kMetaJob] = request.job_id;
  if (!tokenizer.source.empty()) {
    metadata[model::kMetaTokenizerCrc32] = absl::StrCat(tokenizer.crc);
  }
  PT_RETURN_IF_ERROR(model::WriteSafetensors(request.output, metadata, tensors));
  if (!tokenizer.source.empty()) {
    PT_RETURN_IF_ERROR(WriteFileAtomically(tokenizer.destination, tokenizer.contents));
    result.tokenizer_path = tokenizer.destination;
  }
  return result;
}

}  // namespace pipetrain::client
