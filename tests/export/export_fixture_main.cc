// The C++ half of the numpy check (numpy_forward_check.py): trains a small GPT for a few steps
// with the reference trainer, writes its checkpoint the way a worker does, exports it with
// `pipetrain export`'s gathering, and writes two batches with the loss pipetrain computes on
// each (a forward pass of the model loaded back from the exported file). The Python side reads
// the file with the `safetensors` package and must get the same losses with numpy alone.
//
//   export_fixture OUT_DIR   writes OUT_DIR/model.safetensors and OUT_DIR/batches.json
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "client/model_export.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/backend.h"
#include "model/checkpoint_layout.h"
#include "model/job_model.h"
#include "nlohmann/json.hpp"
#include "worker/model/chunk_checkpoint.h"
#include "worker/model/exported_weights.h"
#include "worker/model/reference_trainer.h"
#include "worker/runtime/job_config.h"

namespace pipetrain {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "export_fixture: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Run(const std::string& out) {
  v1::JobSpec spec;
  spec.mutable_model()->set_num_layers(3);
  spec.mutable_model()->set_hidden(32);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_model()->set_ffn_hidden(96);  // not 4 x hidden: n_inner must be honoured
  spec.mutable_training()->set_steps(6);
  spec.mutable_training()->set_microbatch_size(4);
  spec.mutable_training()->set_global_batch(16);
  spec.mutable_training()->set_seed(11);
  spec.mutable_training()->mutable_optimizer()->set_learning_rate(3e-3);
  spec.mutable_checkpoint()->set_dir(out + "/ckpt");
  spec = model::WithDefaults(spec);

  auto dataset = worker::MakeDataset(spec);
  if (!dataset.ok()) return Fail(dataset.status());
  auto config = model::ModelConfig(spec);
  if (!config.ok()) return Fail(config.status());
  auto optimizer = worker::OptimizerSettingsOf(spec);
  if (!optimizer.ok()) return Fail(optimizer.status());
  kernels::CpuBackend backend;
  model::ReferenceTrainerConfig rc;
  rc.model = *config;
  rc.num_microbatches = model::NumMicrobatches(spec);
  rc.microbatch_size = spec.training().microbatch_size();
  rc.optimizer = *optimizer;
  rc.seed = spec.training().seed();
  auto trainer = model::ReferenceTrainer::Create(&backend, dataset->get(), rc);
  if (!trainer.ok()) return Fail(trainer.status());
  for (int s = 0; s < spec.training().steps(); ++s) {
    auto stats = (*trainer)->Step();
    if (!stats.ok()) return Fail(stats.status());
    std::printf("step %d loss %.6f\n", s, stats->loss);
  }
  const int64_t step = spec.training().steps();
  if (absl::Status s = model::SaveChunkCheckpoint(*(*trainer)->model(), step,
                                                  model::StageCheckpointPath(out + "/ckpt", step, 0));
      !s.ok()) {
    return Fail(s);
  }
  client::ExportRequest request;
  request.job_id = "numpy-check";
  request.spec = spec;
  request.num_stages = 1;
  request.output = out + "/model.safetensors";
  auto exported = client::ExportCheckpoint(request);
  if (!exported.ok()) return Fail(exported.status());

  // pipetrain's forward pass on the model loaded back from the file.
  auto chunk = model::GptChunk::Create(&backend, *config, model::WholeModel(*config));
  if (!chunk.ok()) return Fail(chunk.status());
  model::GptChunk* whole = chunk->get();
  if (absl::Status s = model::LoadExportedWeights(request.output, absl::MakeSpan(&whole, 1));
      !s.ok()) {
    return Fail(s);
  }
  const data::Microbatch task = (*dataset)->Get(/*step=*/12345, /*microbatch=*/0, 4);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, config->vocab - 1);
  const int random_batch = 3;
  std::vector<int32_t> tokens(random_batch * config->seq_len), targets(tokens.size());
  for (auto& t : tokens) t = id(rng);
  for (auto& t : targets) t = id(rng);
  nlohmann::json batches = nlohmann::json::array();
  int mb = 0;
  for (const auto& [name, toks, tgts] :
       {std::tuple{"addition task (answer positions only)", task.tokens, task.targets},
        std::tuple{"random ids, every target", tokens, targets}}) {
    model::ForwardInput in;
    in.tokens = toks;
    in.targets = tgts;
    auto forward = whole->Forward(mb, std::move(in));
    if (!forward.ok()) return Fail(forward.status());
    whole->Discard(mb++);
    batches.push_back({{"name", name},
                       {"batch", static_cast<int64_t>(toks.size()) / config->seq_len},
                       {"tokens", toks},
                       {"targets", tgts},
                       {"loss", absl::StrFormat("%.17g", forward->loss)}});
  }
  std::ofstream(out + "/batches.json") << batches.dump(1) << "\n";
  std::printf("wrote %s (%lld tensors) and %s/batches.json\n", request.output.c_str(),
              static_cast<long long>(exported->tensors), out.c_str());
  return 0;
}

}  // namespace
}  // namespace pipetrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: export_fixture OUT_DIR\n");
    return 2;
  }
  return pipetrain::Run(argv[1]);
}
