// The throughput-memory frontier (the first paper's headline figure): for the fixed p = 8 job of
// the emulated comparison, each schedule's peak activation memory and throughput relative to
// 1F1B, simulated and measured in the same run.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite/offload_hook.h"
#include "bench/suite/suite.h"
#include "schedule/render_plot.h"

namespace pipetrain::bench {
namespace {

const std::vector<std::string> kFrontierSchedules = {"1f1b", "interleaved-1f1b", "zb-h1",
                                                     "zb-h2", "zb-v",  "v-min",
                                                     "v-half", "v-zb"};

}  // namespace

Section Frontier(const SuiteOptions& options, const std::vector<Comparison>& emulated) {
  const Stamp start = Now();
  Section section;
  const Comparison* cmp = nullptr;
  for (const Comparison& c : emulated) {
    if (c.p == 8) cmp = &c;
  }
  const ScheduleRun* base = nullptr;
  if (cmp != nullptr) {
    for (const ScheduleRun& r : cmp->runs) {
      if (r.name == "1f1b" && r.ok) base = &r;
    }
  }
  if (base == nullptr) {
    section.markdown = "## Throughput-memory frontier\n\nNot drawn: the p = 8 1F1B run failed.\n\n";
    return section;
  }
  schedule::Plot plot;
  plot.title = absl::StrCat("Throughput vs activation memory, relative to 1F1B (p = ", cmp->p,
                            ", m = ", cmp->m, ", F = B = W)");
  plot.x.label = "peak activation memory per worker / 1F1B's";
  plot.y.label = "throughput / 1F1B's (1F1B step time / step time)";
  plot.x_refs = {0.5, 1.0};
  plot.y_refs = {1.0};
  plot.width = 860;
  plot.height = 520;
  schedule::PlotSeries sim, measured;
  sim.label = "simulated";
  sim.style = schedule::PlotSeries::Style::kMarkers;
  measured.label = "measured (emulated, median of runs)";
  measured.style = schedule::PlotSeries::Style::kMarkers;
  std::string table =
      "| schedule | memory / 1F1B (predicted = measured) | throughput / 1F1B simulated | "
      "measured, each run |\n|---|---|---|---|\n";
  struct Point {
    std::string name;
    double mem, sim, measured;
  };
  std::vector<Point> points;
  double spread = 0;  // largest (max - min) of a schedule's measured ratio over the runs
  int runs = 0;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  for (const std::string& name : kFrontierSchedules) {
    for (const ScheduleRun& r : cmp->runs) {
      if (r.name != name || !r.ok) continue;
      const double mem = r.measured_peak / base->measured_peak;
      const double tsim = base->sim_step / r.sim_step;
      std::string each;
      std::vector<double> ratios;
      for (size_t i = 0; i < r.measured_step.size(); ++i) {
        ratios.push_back(base->measured_step[i] / r.measured_step[i]);
        absl::StrAppend(&each, i ? "; " : "", Fixed(ratios.back(), 3));
      }
      const double tmeas = median(ratios);
      spread = std::max(spread, *std::max_element(ratios.begin(), ratios.end()) -
                                    *std::min_element(ratios.begin(), ratios.end()));
      runs = static_cast<int>(ratios.size());
      points.push_back({name, mem, tsim, tmeas});
      sim.x.push_back(r.sim_peak / base->sim_peak);
      sim.y.push_back(tsim);
      sim.point_labels.push_back(name);
      measured.x.push_back(mem);
      measured.y.push_back(tmeas);
      measured.point_labels.push_back(name);
      absl::StrAppend(&table, "| ", name, " | ", Fixed(r.sim_peak / base->sim_peak, 3),
                      std::abs(r.sim_peak - r.measured_peak) < 1e-6 ? "" : absl::StrCat(
                          " (measured ", Fixed(mem, 3), ")"),
                      " | ", Fixed(tsim, 3), " | ", each, " |\n");
    }
  }
  plot.series.push_back(sim);
  plot.series.push_back(measured);
  std::vector<OffloadPoint> offload = OffloadFrontierPoints(cmp->p, cmp->m);
  std::string offload_note;
  offload_note = absl::StrCat("Offload plans (simulated only, memory and throughput relative "
                              "to 1F1B's simulation): ", OffloadNote(), ".\n\n");
  if (!offload.empty()) {
    schedule::PlotSeries off;
    off.label = "offload plans (simulated)";
    off.style = schedule::PlotSeries::Style::kMarkers;
    for (const OffloadPoint& o : offload) {
      off.x.push_back(o.memory_vs_1f1b);
      off.y.push_back(o.throughput_vs_1f1b);
      off.point_labels.push_back(o.name);
      absl::StrAppend(&table, "| ", o.name, " | ", Fixed(o.memory_vs_1f1b, 3), " | ",
                      Fixed(o.throughput_vs_1f1b, 3), " | - |\n");
    }
    plot.series.push_back(off);
  }

  // The paper's claims, checked on these numbers.
  std::string claims;
  auto find = [&](const std::string& n) -> const Point* {
    for (const Point& p : points) {
      if (p.name == n) return &p;
    }
    return nullptr;
  };
  if (const Point* vh = find("v-half")) {
    absl::StrAppend(&claims, "- V-Half: memory ", Fixed(vh->mem, 3), " of 1F1B's (the paper: about 1/2; here ",
                    "(p+2)//2 = ", (cmp->p + 2) / 2, " of p = ", cmp->p, " units), throughput ",
                    Fixed(vh->sim, 3), " simulated / ", Fixed(vh->measured, 3),
                    " measured (the paper: at least 1F1B's): ",
                    vh->sim >= 1.0 && vh->measured >= 0.99 ? "**holds**" : "**does not hold**",
                    ".\n");
  }
  if (const Point* vz = find("v-zb")) {
    // The fastest schedules at <= 1F1B's memory (ties within 0.5% listed together).
    auto fastest = [&](bool simulated, double* best) {
      *best = 0;
      for (const Point& p : points) {
        if (p.mem <= 1.0 + 1e-9) *best = std::max(*best, simulated ? p.sim : p.measured);
      }
      std::string names;
      for (const Point& p : points) {
        const double v = simulated ? p.sim : p.measured;
        if (p.mem <= 1.0 + 1e-9 && v >= *best * 0.995) {
          absl::StrAppend(&names, names.empty() ? "" : ", ", p.name);
        }
      }
      return names;
    };
    double best_sim = 0, best_meas = 0;
    const std::string fastest_sim = fastest(true, &best_sim);
    const std::string fastest_meas = fastest(false, &best_meas);
    absl::StrAppend(&claims, "- V-ZB at ", Fixed(vz->mem, 3),
                    " of 1F1B's memory: throughput ", Fixed(vz->sim, 3), " simulated / ",
                    Fixed(vz->measured, 3), " measured. Fastest at <= 1F1B's memory (within "
                    "0.5%): simulated ", fastest_sim, " (", Fixed(best_sim, 3), "): ",
                    vz->sim >= best_sim * 0.995 ? "**holds**" : "**does not hold**",
                    "; measured ", fastest_meas, " (", Fixed(best_meas, 3), "): ",
                    vz->measured >= best_meas * 0.995 ? std::string("**holds**")
                    : runs > 1 && best_meas - vz->measured < spread
                        ? absl::StrCat("**holds within the noise** (gap ",
                                       Fixed(best_meas - vz->measured, 3),
                                       " < run-to-run spread ", Fixed(spread, 3), ")")
                        : absl::StrCat("**does not hold** (gap ",
                                       Fixed(best_meas - vz->measured, 3),
                                       ", larger than the run-to-run spread)"),
                    ".\n");
  }
  const Stamp end = Now();
  plot.caption = Caption(options, start, end);
  plot.caption.push_back("data: the p = 8 emulated comparison above (same run)");
  section.markdown = absl::StrCat(
      "## Throughput-memory frontier\n\n", Provenance(options, start, end),
      "From the p = ", cmp->p, " emulated comparison above (same run, F = B = W, so the "
      "simulated column is the papers' idealised setting). x: peak activation memory per worker "
      "relative to 1F1B's; y: throughput relative to 1F1B's. Measured throughput: the median over "
      "the runs of 1F1B's measured step time / the schedule's, each run side by side.\n\n",
      table, "\nNoise: ", runs > 1 ? absl::StrCat("over the ", runs, " runs, a schedule's measured "
      "throughput ratio moved by at most ", Fixed(spread, 3), " (max - min); differences smaller "
      "than that are not resolved by this run.") : "one run only (quick mode): no spread measured.",
      "\n\n", claims, "\n", offload_note, "![frontier](bench/frontier.svg)\n\n");
  section.figures.push_back({"frontier.svg", schedule::RenderPlot(plot)});
  return section;
}

}  // namespace pipetrain::bench
