#include "worker/data/addition_task.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pipetrain::data {

AdditionTask::AdditionTask(int digits, uint64_t seed, Split split)
    : digits_(digits), seed_(seed), split_(split) {
  CHECK(digits >= 1 && digits <= 9) << "digits must be in [1, 9]";
}

std::string AdditionTask::name() const {
  const char* part = split_ == Split::kTrain ? ":train" : split_ == Split::kValidation ? ":val" : "";
  return absl::StrCat("addition", digits_, part);
}

bool AdditionTask::HeldOut(int64_t a, int64_t b) const {
  constexpr uint64_t kHeldOutSalt = 0x76616c6964617465ULL;  // fixed: the same pairs every job
  return MixSeed(kHeldOutSalt, static_cast<uint64_t>(std::min(a, b)),
                 static_cast<uint64_t>(std::max(a, b)), static_cast<uint64_t>(digits_)) %
             kHeldOutOneIn ==
         0;
}

Microbatch AdditionTask::Get(int64_t step, int microbatch, int microbatch_size) const {
  Microbatch mb;
  mb.microbatch_size = microbatch_size;
  mb.seq_len = seq_len();
  int64_t limit = 1;
  for (int i = 0; i < digits_; ++i) limit *= 10;
  for (int s = 0; s < microbatch_size; ++s) {
    std::mt19937_64 rng(MixSeed(seed_, static_cast<uint64_t>(step),
                                static_cast<uint64_t>(microbatch), static_cast<uint64_t>(s)));
    std::uniform_int_distribution<int64_t> num(0, limit - 1);
    int64_t a = num(rng), b = num(rng);
    // Redraw until the pair belongs to the split (a tenth of pairs are held out, so kTrain
    // redraws rarely and kValidation about ten times).
    while (split_ != Split::kAll && HeldOut(a, b) != (split_ == Split::kValidation)) {
      a = num(rng);
      b = num(rng);
    }
    const int64_t c = a + b;
    std::vector<int32_t> seq;
    auto put = [&](int64_t v, int n) {
      std::vector<int32_t> d(n);
      for (int i = n - 1; i >= 0; --i, v /= 10) d[i] = static_cast<int32_t>(v % 10);
      seq.insert(seq.end(), d.begin(), d.end());
    };
    put(a, digits_);
    seq.push_back(kPlus);
    put(b, digits_);
    seq.push_back(kEquals);
    int64_t r = c;
    for (int i = 0; i <= digits_; ++i, r /= 10) seq.push_back(static_cast<int32_t>(r % 10));
    const int answer_start = 2 * digits_ + 2;  // index in seq of the first answer digit
    for (int t = 0; t < seq_len(); ++t) {
      mb.tokens.push_back(seq[t]);
      mb.targets.push_back(t + 1 >= answer_start ? seq[t + 1] : -1);
    }
  }
  return mb;
}

}  // namespace pipetrain::data
