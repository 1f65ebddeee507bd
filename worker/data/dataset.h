// Dataset: a deterministic source of training microbatches. Get(step, microbatch, size) is a pure
// function of the dataset's seed and its arguments, so every worker of a pipeline (and the
// reference trainer) sees exactly the same microbatch for the same (step, microbatch) without
// coordination. Also scoring helpers for predictions.
// Thread-safety: implementations are immutable after construction; Get is thread-safe.
#ifndef PIPETRAIN_WORKER_DATA_DATASET_H_
#define PIPETRAIN_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::data {

// microbatch_size sequences of seq_len tokens, row-major; targets[i] is the token expected after
// position i, or -1 (kernels::kIgnoreTarget) where no loss is taken.
struct Microbatch {
  int64_t microbatch_size = 0;
  int64_t seq_len = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
};

// Which part of a data source a dataset reads. Evaluation (docs/data.md, "Validation data")
// holds a part out of training: kTrain is the rest, kValidation the held-out part; kAll (the
// default, a job without evaluation) is everything, as before evaluation existed.
enum class Split { kAll, kTrain, kValidation };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  virtual int vocab_size() const = 0;
  virtual int seq_len() const = 0;
  virtual Microbatch Get(int64_t step, int microbatch, int microbatch_size) const = 0;
};

struct Accuracy {
  int64_t correct_tokens = 0;
  int64_t scored_tokens = 0;    // positions with a target
  int64_t exact_sequences = 0;  // sequences with every scored position correct
  int64_t sequences = 0;
  void Add(const Accuracy& o);
  double token_accuracy() const;
  double exact_match() const;
};

// Scores argmax predictions (one per position) against mb.targets.
Accuracy Score(const Microbatch& mb, const std::vector<int32_t>& predictions);

// Validation microbatch `index` (0-based) of every validation pass: the same microbatches each
// pass, from `validation` (a kValidation dataset, or a token source's val.bin). The pipeline's
// last stage and the reference trainer both take them from here. Training never asks for step 0
// (it counts steps from 1), which this uses.
Microbatch ValidationMicrobatch(const Dataset& validation, int index, int microbatch_size);

// 64-bit mix of (seed, a, b, c), used for deterministic sampling.
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

}  // namespace pipetrain::data

#endif  // PIPETRAIN_WORKER_DATA_DATASET_H_
