#include "model/model_presets.h"

#include "absl/strings/str_join.h"

namespace pipetrain::model {

const std::vector<ModelPreset>& ModelPresets() {
  static const auto* const kPresets = new std::vector<ModelPreset>{
      {"gpt2-small", 12, 768, 12, 1024, 50257},
      {"gpt2-medium", 24, 1024, 16, 1024, 50257},
      {"gpt2-large", 36, 1280, 20, 1024, 50257},
      {"gpt2-xl", 48, 1600, 25, 1024, 50257},
      {"tiny", 2, 64, 4, 0, 0},
      {"small-test", 4, 128, 4, 0, 0},
  };
  return *kPresets;
}

const ModelPreset* FindModelPreset(const std::string& name) {
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string ModelPresetNames() {
  return absl::StrJoin(ModelPresets(), ", ",
                       [](std::string* out, const ModelPreset& p) { out->append(p.name); });
}

v1::ModelSpec WithModelPreset(const v1::ModelSpec& model) {
  v1::ModelSpec m = model;
  const ModelPreset* p = FindModelPreset(m.preset());
  if (p == nullptr) return m;
  if (m.num_layers() == 0) m.set_num_layers(p->num_layers);
  if (m.hidden() == 0) m.set_hidden(p->hidden);
  if (m.num_heads() == 0) m.set_num_heads(p->num_heads);
  if (m.seq_len() == 0) m.set_seq_len(p->seq_len);
  if (m.vocab_size() == 0) m.set_vocab_size(p->vocab_size);
  return m;
}

}  // namespace pipetrain::model
