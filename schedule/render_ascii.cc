#include "schedule/render_ascii.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pipetrain::schedule {
namespace {

std::string Label(const Action& a, int chunk) {
  std::string s = absl::StrCat(KindLabel(a.kind), a.microbatch);
  if (chunk > 0) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

std::string Num(double x) { return absl::StrFormat("%.6g", x); }

}  // namespace

std::vector<int> ChunkIndexOfStages(const Schedule& schedule) {
  std::vector<int> chunk(schedule.stage_to_worker.size(), 0);
  std::vector<int> seen(std::max(schedule.num_workers, 0), 0);
  for (size_t s = 0; s < chunk.size(); ++s) {
    const int w = schedule.stage_to_worker[s];
    if (w >= 0 && w < schedule.num_workers) chunk[s] = seen[w]++;
  }
  return chunk;
}

std::string RenderAscii(const Schedule& schedule, const SimResult& sim) {
  const std::vector<int> chunk = ChunkIndexOfStages(schedule);
  double slot = 0.0, end = 0.0;
  size_t width = 2;
  for (const TimedAction& t : sim.timeline) {
    if (!IsCompute(t.action.kind)) continue;
    const double d = t.end - t.start;
    if (d > 1e-12 && (slot == 0.0 || d < slot)) slot = d;
    end = std::max(end, t.end);
    width = std::max(width, Label(t.action, chunk[t.action.stage]).size());
  }
  if (slot == 0.0) return "(no compute actions)\n";
  const int cols = static_cast<int>(std::lround(end / slot));
  const int p = schedule.num_workers;
  std::vector<std::vector<std::string>> grid(p, std::vector<std::string>(cols, "."));
  for (const TimedAction& t : sim.timeline) {
    if (!IsCompute(t.action.kind) || t.worker < 0 || t.worker >= p) continue;
    const int a = static_cast<int>(std::lround(t.start / slot));
    const int b = std::max(a + 1, static_cast<int>(std::lround(t.end / slot)));
    for (int c = a; c < b && c < cols; ++c) {
      grid[t.worker][c] = c == a ? Label(t.action, chunk[t.action.stage]) : std::string(width, '=');
    }
  }
  const size_t cell = width + 1;
  std::string out = absl::StrCat("time slot = ", Num(slot), "\n");
  std::string header = "     ";
  for (int c = 0; c < cols; ++c) {
    std::string mark = c % 5 == 0 ? Num(c * slot) : "";
    mark.resize(cell, ' ');
    header += mark;
  }
  while (!header.empty() && header.back() == ' ') header.pop_back();
  out += header + "\n";
  for (int w = 0; w < p; ++w) {
    std::string line = absl::StrFormat("w%-3d ", w);
    for (int c = 0; c < cols; ++c) {
      std::string s = grid[w][c];
      s.resize(cell, ' ');
      line += s;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string RenderSummary(const Schedule& schedule, const SimResult& sim) {
  std::string out =
      absl::StrCat("schedule ", schedule.name, ": ", schedule.num_workers, " workers, ",
                   schedule.num_stages, " stages (", schedule.ChunksPerWorker(), " per worker), ",
                   schedule.num_microbatches, " microbatches\n");
  absl::StrAppend(&out, "makespan ", Num(sim.makespan), "\n");
  absl::StrAppend(&out, "step bubble ", absl::StrFormat("%.6f", sim.step_bubble_ratio),
                  " (1 - work / (workers x makespan))\n");
  absl::StrAppend(&out, "bubble ratio ", absl::StrFormat("%.6f", sim.bubble_ratio),
                  " (per stage: the busiest worker's idle share of its own span)\n");
  absl::StrAppend(&out, "peak activation memory (units of one microbatch for a worker's share):");
  for (size_t w = 0; w < sim.peak_memory.size(); ++w) {
    absl::StrAppend(&out, " w", w, "=", Num(sim.peak_memory[w]));
  }
  out += "\n";
  return out;
}

}  // namespace pipetrain::schedule
