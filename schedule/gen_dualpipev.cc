#include "schedule/gen_dualpipev.h"

#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pipetrain::schedule {
namespace {

// Builds one worker's list; chunk 0 is stage r, chunk 1 stage 2p-1-r.
class WorkerList {
 public:
  WorkerList(int p, int r, std::vector<Action>* out) : stage_{r, 2 * p - 1 - r}, out_(out) {}

  void F(int chunk) { out_->push_back({ActionKind::kF, stage_[chunk], next_f_[chunk]++}); }
  // A backward: fused (BW), or split (B now, its W queued for W()).
  void Backward(int chunk, bool split) {
    const int mb = next_b_[chunk]++;
    if (split) {
      out_->push_back({ActionKind::kB, stage_[chunk], mb});
      pending_w_.push_back({stage_[chunk], mb});
    } else {
      out_->push_back({ActionKind::kBW, stage_[chunk], mb});
    }
  }
  // Chunk f_chunk's next F overlapped with chunk b_chunk's next (fused) backward.
  void Overlapped(int f_chunk, int b_chunk) {
    out_->push_back({ActionKind::kOverlapF, stage_[f_chunk], next_f_[f_chunk]++});
    Backward(b_chunk, /*split=*/false);
  }
  void W() {
    const std::pair<int, int> w = pending_w_.front();
    pending_w_.pop_front();
    out_->push_back({ActionKind::kW, w.first, w.second});
  }

 private:
  const int stage_[2];
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  std::deque<std::pair<int, int>> pending_w_;  // (stage, microbatch) of split B's, FIFO
  std::vector<Action>* out_;
};

}  // namespace

absl::StatusOr<Schedule> MakeDualPipeV(const PipelineSpec& spec) {
  const int p = spec.num_workers, m = spec.num_microbatches;
  if (spec.chunks_per_worker != 0 && spec.chunks_per_worker != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks_per_worker must be 2 for dualpipev (or 0; got ", spec.chunks_per_worker, ")"));
  }
  if (p < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("dualpipev needs num_workers >= 2 (got ", p, ")"));
  }
  if (m < 2 * p) {
    return absl::InvalidArgumentError(
        absl::StrCat("dualpipev needs num_microbatches >= 2 x num_workers = ", 2 * p, " (got ", m,
                     "); use zb-v or v-zb for fewer microbatches"));
  }
  Schedule s = MakeEmptySchedule("dualpipev", p, m, VPlacement(p));
  for (int r = 0; r < p; ++r) {
    auto& list = s.worker_actions[r];
    list.reserve(6 * static_cast<size_t>(m));
    WorkerList w(p, r, &list);
    const int down = p - 1 - r;  // workers after this one
    for (int i = 0; i < 2 * down; ++i) w.F(0);
    for (int i = 0; i <= r; ++i) {
      w.F(0);
      w.F(1);
    }
    for (int i = 0; i < down; ++i) {
      w.Backward(1, /*split=*/true);
      w.W();
      w.F(1);
    }
    const int steady = m - 2 * p + r + 1;
    for (int i = 0; i < steady; ++i) {
      if (i == 0 && r == p - 1) {
        w.F(0);
        w.Backward(1, /*split=*/false);
      } else {
        w.Overlapped(0, 1);
      }
      w.Overlapped(1, 0);
    }
    for (int i = 0; i < down; ++i) {
      w.Backward(1, /*split=*/false);
      w.Overlapped(1, 0);
    }
    // Split from the middle on: r+1 split backwards, whose W's fill phases 7 and 8.
    bool split = false;
    for (int i = 0; i <= r; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) split = true;
      w.Backward(1, split);
      if (i == (r + 1) / 2 && r % 2 == 0) split = true;
      w.Backward(0, split);
    }
    for (int i = 0; i < down; ++i) {
      w.W();
      w.Backward(0, /*split=*/true);
    }
    for (int i = 0; i <= r; ++i) w.W();
  }
  return s;
}

}  // namespace pipetrain::schedule
