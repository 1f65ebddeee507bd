// EmbeddingGradPlan: the fixed summation order a parallel backend uses for the embedding table's
// gradient, dwte[ids[n],:] += dout[n,:], built on the host from the token ids (which are host data
// in Backend::EmbeddingBackward anyway).
//
// Why this shape. Repeated ids make a token-parallel scatter-add race, and atomics would make
// the sum order (so the rounding) change run to run. Sorting tokens by id on the host gives each
// distinct id the list of its tokens in token order, so one thread per (id, column) can add them
// in that order, the CPU backend's own order, with no races and no atomics. A frequent id (in the
// 2-digit-addition data a handful of ids cover every token) would then be one long sequential
// loop, so an id with more than `segment_tokens` tokens is cut into fixed segments of that many
// tokens: pass 1 sums each segment (tokens in order), pass 2 adds an id's segment sums in order.
// Every boundary depends on the ids alone, so the result is bitwise the same run to run; light
// ids (at most segment_tokens tokens) are summed exactly in the CPU's order.
//
// Layout: everything lives in one int32 array (`packed`) so a backend stages it with one copy:
//   [positions: N][rows: 5 per distinct id][segments: 2 per segment]
// positions  token indices grouped by id (ascending id), ascending within an id;
// row        {id, positions begin, positions end, segments begin, segments end}; no segments
//            (begin == end) means a light id summed straight from its positions;
// segment    {positions begin, positions end}, at most segment_tokens long.
// Thread-safety: plain value and a pure function.
#ifndef PIPETRAIN_KERNELS_EMBEDDING_GRAD_PLAN_H_
#define PIPETRAIN_KERNELS_EMBEDDING_GRAD_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace pipetrain::kernels {

inline constexpr int kEmbeddingSegmentTokens = 32;

struct EmbeddingGradPlan {
  static constexpr int kRowInts = 5;
  static constexpr int kSegmentInts = 2;
  std::vector<int32_t> packed;
  int64_t num_positions = 0;
  int64_t num_rows = 0;  // distinct ids
  int64_t num_segments = 0;
  int64_t rows_offset() const { return num_positions; }
  int64_t segments_offset() const { return num_positions + num_rows * kRowInts; }
};

// `ids` must all be in [0, vocab) (Backend's checks guarantee it); segment_tokens >= 1.
EmbeddingGradPlan BuildEmbeddingGradPlan(absl::Span<const int32_t> ids, int64_t vocab,
                                         int segment_tokens = kEmbeddingSegmentTokens);

}  // namespace pipetrain::kernels

#endif  // PIPETRAIN_KERNELS_EMBEDDING_GRAD_PLAN_H_
