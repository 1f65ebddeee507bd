// Prints bubble tables of the V schedules against 1F1B (and engine variants with --variants),
// measured by the one Simulate. Used to produce the tables in docs/SCHEDULES.md.
//   v_bubble_table [f b w comm]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "schedule/generator.h"
#include "schedule/render_ascii.h"
#include "schedule/simulator.h"
#include "schedule/v_greedy.h"

using namespace pipetrain::schedule;

namespace {

struct M {
  double bubble = -1, peak = -1;
};

M Measure(const Schedule& s, const CostModel& costs) {
  auto r = Simulate(s, costs);
  if (!r.ok()) return {};
  return {r->bubble_ratio, *std::max_element(r->peak_memory.begin(), r->peak_memory.end())};
}

}  // namespace

int main(int argc, char** argv) {
  double f = 1, b = 1, w = 1, comm = 0;
  if (argc >= 4) {
    f = atof(argv[1]);
    b = atof(argv[2]);
    w = atof(argv[3]);
  }
  if (argc >= 5) comm = atof(argv[4]);
  if (argc >= 8) {  // f b w comm name p m: draw one schedule
    PipelineSpec spec;
    spec.num_workers = atoi(argv[6]);
    spec.num_microbatches = atoi(argv[7]);
    spec.f = f;
    spec.b = b;
    spec.w = w;
    spec.comm = comm;
    auto s = Generate(argv[5], spec);
    if (!s.ok()) return std::printf("%s\n", std::string(s.status().message()).c_str()), 1;
    auto r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
    std::printf("%s\n%s\n", RenderAscii(*s, *r).c_str(), RenderSummary(*s, *r).c_str());
    return 0;
  }
  std::printf("costs %g:%g:%g comm %g\n", f, b, w, comm);
  std::printf("%3s %4s %7s | %-13s %-13s %-13s %-13s\n", "p", "m", "1f1b", "v-min", "v-half",
              "v-zb", "zb-v");
  for (int p : {2, 3, 4, 6, 8, 12, 16}) {
    for (int m : {p, 2 * p, 4 * p, 64}) {
      if (m < p) continue;
      PipelineSpec spec;
      spec.num_workers = p;
      spec.num_microbatches = m;
      spec.f = f;
      spec.b = b;
      spec.w = w;
      spec.comm = comm;
      auto one = Generate("1f1b", spec);
      const M base = Measure(*one, CostModelFor(spec, 1));
      std::printf("%3d %4d %7.4f |", p, m, base.bubble);
      for (const char* name : {"v-min", "v-half", "v-zb", "zb-v"}) {
        auto s = Generate(name, spec);
        if (!s.ok()) {
          std::printf(" %-13s", "ERR");
          continue;
        }
        const M x = Measure(*s, CostModelFor(spec, 2));
        std::printf(" %6.4f(%4.1f)", x.bubble, x.peak);
      }
      std::printf("\n");
    }
  }
  return 0;
}
