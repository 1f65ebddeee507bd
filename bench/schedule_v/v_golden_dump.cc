// Prints bubble / peak / makespan (and an order hash) of every V generator and auto over a grid
// of (p, m, costs): the reference for tests/schedule_v's pinned-quality test. Usage:
//   v_golden_dump [big]   (big: also p = 64, m = 1024)
//   v_golden_dump reference-grid   v-min / v-half over the grid of authors_v_reference.py, one
//                                  line "name p m f b w comm bubble peak" each
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "schedule/generator.h"
#include "schedule/simulator.h"

using namespace pipetrain::schedule;

int main(int argc, char** argv) {
  const bool big = argc > 1 && std::strcmp(argv[1], "big") == 0;
  if (argc > 1 && std::strcmp(argv[1], "reference-grid") == 0) {
    struct G {
      double f, b, w, comm;
    };
    for (int p : {2, 3, 4, 6, 8, 12, 16}) {
      for (int m : {p, 2 * p, 4 * p}) {
        for (const G& c : {G{1, 1, 1, 0}, G{1, 2, 1, 0}, G{1, 1.5, 0.5, 0}, G{1, 2, 1, 0.2}}) {
          for (const char* name : {"v-min", "v-half"}) {
            PipelineSpec spec;
            spec.num_workers = p;
            spec.num_microbatches = m;
            spec.f = c.f, spec.b = c.b, spec.w = c.w, spec.comm = c.comm;
            absl::StatusOr<Schedule> s = Generate(name, spec);
            if (!s.ok()) return std::printf("%s: %s\n", name, s.status().ToString().c_str()), 1;
            absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, 2));
            if (!r.ok()) return std::printf("%s\n", r.status().ToString().c_str()), 1;
            double peak = 0;
            for (double x : r->peak_memory) peak = std::max(peak, x);
            std::printf("%s %d %d %g %g %g %g %.9g %.9g\n", name, p, m, c.f, c.b, c.w, c.comm,
                        r->bubble_ratio, peak);
          }
        }
      }
    }
    return 0;
  }
  struct C {
    double f, b, w, comm;
  };
  const C costs[] = {{1, 1, 1, 0}, {1, 2, 1, 0}, {1, 1.5, 0.5, 0}, {1, 1, 1, 0.2}, {1, 2, 1, 0.3}};
  const char* names[] = {"v-min", "v-half", "v-zb", "zb-v", "v-adaptive", "auto"};
  auto one = [&](int p, int m, const C& c) {
    for (const char* name : names) {
      PipelineSpec spec;
      spec.num_workers = p;
      spec.num_microbatches = m;
      spec.f = c.f, spec.b = c.b, spec.w = c.w, spec.comm = c.comm;
      const bool limited = std::string(name) == "v-adaptive" || std::string(name) == "auto";
      if (limited) spec.memory_limit = (p + 2) / 2 + 0.5 * (p % 3);
      absl::StatusOr<Schedule> s = Generate(name, spec);
      if (!s.ok()) {
        std::printf("%s %d %d %g %g %g %g ERR\n", name, p, m, c.f, c.b, c.w, c.comm);
        continue;
      }
      absl::StatusOr<SimResult> r = Simulate(*s, CostModelFor(spec, s->ChunksPerWorker()));
      double peak = 0;
      for (double x : r->peak_memory) peak = std::max(peak, x);
      size_t h = 0;
      for (const auto& l : s->worker_actions)
        for (const Action& a : l)
          h = h * 1000003 + (static_cast<size_t>(a.kind) * 131 + a.stage) * 100003 + a.microbatch;
      std::printf("%s %d %d %g %g %g %g %.9g %.9g %.9g %zx %s\n", name, p, m, c.f, c.b, c.w,
                  c.comm, r->bubble_ratio, peak, r->makespan, h, s->name.c_str());
    }
  };
  if (big) {
    for (const C& c : costs) one(64, 1024, c);
    return 0;
  }
  for (int p : {2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32}) {
    for (int m : {1, p, 2 * p, 3 * p + 1, 4 * p, 8 * p + 3}) {
      for (const C& c : costs) one(p, m, c);
    }
  }
  return 0;
}
