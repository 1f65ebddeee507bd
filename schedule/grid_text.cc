#include "schedule/grid_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pipetrain::schedule {
namespace {

constexpr int kRowWindow = 6;     // rows shown either side of the first mark
constexpr int kWorkerWindow = 8;  // workers shown either side of the first mark

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string FormatGrid(const Schedule& schedule, const std::vector<std::pair<int, int>>& marked) {
  const int p = static_cast<int>(schedule.worker_actions.size());
  if (p == 0) return "(no workers)\n";
  size_t rows = 0;
  for (const auto& list : schedule.worker_actions) rows = std::max(rows, list.size());
  auto is_marked = [&](int w, int k) {
    return std::find(marked.begin(), marked.end(), std::make_pair(w, k)) != marked.end();
  };
  int focus_w = 0, focus_k = 0;
  if (!marked.empty()) {
    focus_w = std::clamp(marked.front().first, 0, p - 1);
    focus_k = std::max(0, marked.front().second);
  }
  int w_lo = 0, w_hi = p - 1;
  if (p > 2 * kWorkerWindow + 1) {
    w_lo = std::max(0, focus_w - kWorkerWindow);
    w_hi = std::min(p - 1, w_lo + 2 * kWorkerWindow);
  }
  int k_lo = 0, k_hi = static_cast<int>(rows) - 1;
  if (static_cast<int>(rows) > 4 * kRowWindow) {
    k_lo = std::max(0, focus_k - kRowWindow);
    k_hi = std::min(static_cast<int>(rows) - 1, focus_k + kRowWindow);
  }
  size_t width = 4;
  for (int w = w_lo; w <= w_hi; ++w) {
    const auto& list = schedule.worker_actions[w];
    for (int k = k_lo; k <= k_hi && k < static_cast<int>(list.size()); ++k) {
      width = std::max(width, ToString(list[k]).size() + 2);
    }
  }
  std::string out = Pad("step", 6);
  for (int w = w_lo; w <= w_hi; ++w) out += Pad(absl::StrCat(" w", w), width + 1);
  out += "\n";
  if (k_lo > 0) out += absl::StrCat("  ... ", k_lo, " steps above\n");
  for (int k = k_lo; k <= k_hi; ++k) {
    std::string line = Pad(absl::StrCat(k), 6);
    for (int w = w_lo; w <= w_hi; ++w) {
      const auto& list = schedule.worker_actions[w];
      std::string cell = k < static_cast<int>(list.size()) ? ToString(list[k]) : "";
      cell = is_marked(w, k) ? absl::StrCat("[", cell, "]") : absl::StrCat(" ", cell, " ");
      line += Pad(cell, width + 1);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (k_hi + 1 < static_cast<int>(rows)) {
    out += absl::StrCat("  ... ", static_cast<int>(rows) - k_hi - 1, " steps below\n");
  }
  if (w_lo > 0 || w_hi < p - 1) {
    out += absl::StrCat("  (workers ", w_lo, "..", w_hi, " of ", p, " shown)\n");
  }
  return out;
}

}  // namespace pipetrain::schedule
