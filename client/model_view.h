// How a job's model and training recipe are shown to people: the model line (shape and
// parameter count) that `pipetrain plan --job` and `pipetrain status` print, and the learning
// rate line of `status`. Computed from the spec with model/'s functions, never anew.
//
// Thread-safety: pure functions.
#ifndef PIPETRAIN_CLIENT_MODEL_VIEW_H_
#define PIPETRAIN_CLIENT_MODEL_VIEW_H_

#include <string>

#include "pipetrain/v1/job.pb.h"

namespace pipetrain::client {

// "model: gpt2-small, 12 layers x 768 hidden, 12 heads, ffn 3072, seq 1024, vocab 50257;
// 163,037,184 parameters (163.0M)" (the preset only when the spec names one), from the spec's
// GPT shape (model::ModelConfig, model::ModelParameterCount); empty if the spec has none.
std::string FormatModelLine(const v1::JobSpec& spec);
// "lr: cosine from 0.003, warmup 10, floor 0.1 x peak at step 300; next t=43: 0.00251": the
// schedule and the learning rate of the next optimizer step (t = steps_done + 1, 1-based as
// AdamW counts; model::LearningRate), none once every step is done; empty if the schedule is
// unknown.
std::string FormatLearningRateLine(const v1::JobSpec& spec, int steps_done);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_MODEL_VIEW_H_
