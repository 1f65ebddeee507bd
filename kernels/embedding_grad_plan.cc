#include "kernels/embedding_grad_plan.h"

#include <algorithm>

namespace pipetrain::kernels {

EmbeddingGradPlan BuildEmbeddingGradPlan(absl::Span<const int32_t> ids, int64_t vocab,
                                         int segment_tokens) {
  const int64_t n = static_cast<int64_t>(ids.size());
  // Tokens grouped by id, token order within an id (a stable sort by id).
  std::vector<int32_t> positions(static_cast<size_t>(n));
  if (vocab <= 8 * n + 1024) {
    // Counting sort: O(N + V), cheaper than comparing when the vocabulary is small.
    std::vector<int32_t> start(static_cast<size_t>(vocab) + 1, 0);
    for (int32_t id : ids) ++start[static_cast<size_t>(id) + 1];
    for (int64_t v = 0; v < vocab; ++v) start[v + 1] += start[v];
    for (int64_t i = 0; i < n; ++i) positions[start[ids[i]]++] = static_cast<int32_t>(i);
  } else {
    std::vector<uint64_t> keys(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      keys[i] =
          (static_cast<uint64_t>(static_cast<uint32_t>(ids[i])) << 32) | static_cast<uint32_t>(i);
    }
    std::sort(keys.begin(), keys.end());
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(keys[i] & 0xffffffffu);
  }
  std::vector<int32_t> rows, segments;
  for (int64_t b = 0; b < n;) {
    const int32_t id = ids[positions[b]];
    int64_t e = b;
    while (e < n && ids[positions[e]] == id) ++e;
    const int32_t seg_begin = static_cast<int32_t>(segments.size() / 2);
    if (e - b > segment_tokens) {
      for (int64_t s = b; s < e; s += segment_tokens) {
        segments.push_back(static_cast<int32_t>(s));
        segments.push_back(static_cast<int32_t>(std::min<int64_t>(e, s + segment_tokens)));
      }
    }
    const int32_t seg_end = static_cast<int32_t>(segments.size() / 2);
    rows.insert(rows.end(),
                {id, static_cast<int32_t>(b), static_cast<int32_t>(e), seg_begin, seg_end});
    b = e;
  }
  EmbeddingGradPlan plan;
  plan.num_positions = n;
  plan.num_rows = static_cast<int64_t>(rows.size()) / EmbeddingGradPlan::kRowInts;
  plan.num_segments = static_cast<int64_t>(segments.size()) / EmbeddingGradPlan::kSegmentInts;
  plan.packed = std::move(positions);
  plan.packed.insert(plan.packed.end(), rows.begin(), rows.end());
  plan.packed.insert(plan.packed.end(), segments.begin(), segments.end());
  return plan;
}

}  // namespace pipetrain::kernels
