// AdditionTask: the embedded default task. Each sequence is "a+b=c" with a, b uniform
// `digits`-digit numbers (zero padded, most significant digit first) and the sum c written
// least-significant digit first with digits+1 digits (reversed sums are learnable left to right).
// Vocabulary: 0-9 digits, 10 '+', 11 '='. Loss and accuracy are taken on the digits+1 answer
// positions only. Exact-match accuracy under teacher forcing equals greedy-decoding accuracy
// (every answer digit is right given right previous digits). seq_len = 3*digits + 2.
// Held-out problems (Split): the unordered pair {a, b} is a validation problem when a fixed hash
// of it (not of the job's seed) is 0 mod kHeldOutOneIn, about a tenth of all pairs; with
// kTrain, a drawn pair that is held out is redrawn (so training never sees a + b or b + a of
// one), with kValidation only held-out pairs are kept. kAll draws every pair.
// Thread-safety: immutable; thread-safe.
#ifndef PIPETRAIN_WORKER_DATA_ADDITION_TASK_H_
#define PIPETRAIN_WORKER_DATA_ADDITION_TASK_H_

#include "worker/data/dataset.h"

namespace pipetrain::data {

class AdditionTask : public Dataset {
 public:
  static constexpr int kPlus = 10;
  static constexpr int kEquals = 11;

  static constexpr int kHeldOutOneIn = 10;

  // digits in [1, 9].
  AdditionTask(int digits, uint64_t seed, Split split = Split::kAll);

  // Whether a + b (in either order) is a held-out validation problem.
  bool HeldOut(int64_t a, int64_t b) const;

  std::string name() const override;
  int vocab_size() const override { return 12; }
  int seq_len() const override { return 3 * digits_ + 2; }
  Microbatch Get(int64_t step, int microbatch, int microbatch_size) const override;

 private:
  int digits_;
  uint64_t seed_;
  Split split_;
};

}  // namespace pipetrain::data

#endif  // PIPETRAIN_WORKER_DATA_ADDITION_TASK_H_
