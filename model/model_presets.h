// Model presets: named GPT shapes for ModelSpec.preset. A preset fills the shape fields a spec
// leaves 0 (explicit fields override it); model::WithDefaults applies it, nowhere else.
// The GPT-2 presets have GPT-2's shapes (seq_len 1024, vocab 50257, ffn 4 x hidden); this model
// does not tie the LM head to the token embedding, so it has one more vocab x hidden matrix than
// GPT-2 (gpt2-small: 163.0M parameters here, GPT-2's 124M counts that matrix once).
// "tiny" and "small-test" are for tests and demos: they leave seq_len and vocab_size to the data.
//
// Thread-safety: immutable data and pure functions.
#ifndef PIPETRAIN_MODEL_MODEL_PRESETS_H_
#define PIPETRAIN_MODEL_MODEL_PRESETS_H_

#include <string>
#include <vector>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::model {

struct ModelPreset {
  std::string name;
  int num_layers = 0;
  int hidden = 0;
  int num_heads = 0;
  int seq_len = 0;     // 0: the data source's
  int vocab_size = 0;  // 0: the data source's
};

// Every preset, in the order error messages list them.
const std::vector<ModelPreset>& ModelPresets();
// The preset called `name`, or null.
const ModelPreset* FindModelPreset(const std::string& name);
// "gpt2-small, gpt2-medium, ...": the allowed names, for error messages.
std::string ModelPresetNames();
// `model` with its preset's values in every shape field it leaves 0 (unchanged without a preset
// or with an unknown one: validation reports that). ffn_hidden is not a preset field: its
// default, 4 x hidden, follows the hidden size either way.
v1::ModelSpec WithModelPreset(const v1::ModelSpec& model);

}  // namespace pipetrain::model

#endif  // PIPETRAIN_MODEL_MODEL_PRESETS_H_
