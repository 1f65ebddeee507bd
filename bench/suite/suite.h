// The benchmark suite (pipetrain_bench, driven by scripts/bench.sh): every section measures in
// this process (or runs one of the other bench programs) and returns Markdown plus SVG figures.
// Each table and figure carries the moment, the machine and the command that produced it.
//
// Thread-safety: sections run one after the other on the main thread.
#ifndef PIPETRAIN_BENCH_SUITE_SUITE_H_
#define PIPETRAIN_BENCH_SUITE_SUITE_H_

#include <string>
#include <vector>

#include "schedule/generator.h"

namespace pipetrain::bench {

struct SuiteOptions {
  bool quick = false;    // smoke-test sizes: seconds, not minutes; numbers are not meaningful
  int repeats = 2;       // independent repetitions of the key ratios (noise)
  std::string out_dir;   // BENCHMARKS.md goes here, figures under out_dir/bench/
  std::string command;   // the command line as run, recorded beside every figure
  std::string transport_bench;  // paths of the other bench programs; empty = section skipped
  std::string kernels_bench;
  std::string blas_compare;     // bench/kernels' blas_compare (BLAS candidates); empty = skipped
  std::string blas_root;        // where candidate BLAS packages are unpacked (blas_compare --root)
  std::string offload_bench;    // bench/offload's offload_curve (issue 7's figures)
  std::vector<std::string> sections;  // empty = all
};

// Machine and load at one moment.
struct Stamp {
  std::string date;      // UTC, "2026-11-22 06:10:03 UTC"
  std::string machine;   // "2 cores (Intel Xeon ...), 23.4 GiB memory"
  std::string load;      // "load average 1.52 1.40 1.33"
  std::string Line() const;  // "date; machine; load"
};
Stamp Now();

struct Figure {
  std::string file;  // name under out_dir/bench/, e.g. "frontier.svg"
  std::string svg;
};

struct Section {
  std::string markdown;
  std::vector<Figure> figures;
};

// "Measured <date> on <machine>, <load> (start) .. <load> (end); command: `...`."
std::string Provenance(const SuiteOptions& options, const Stamp& start, const Stamp& end);
// Caption lines for a figure (same facts, short lines).
std::vector<std::string> Caption(const SuiteOptions& options, const Stamp& start,
                                 const Stamp& end);

// Results of the side-by-side comparison that the frontier section reuses.
struct ScheduleRun {
  std::string name;
  bool ok = false;
  std::string error;
  double sim_step = 0;        // nominal costs, seconds
  std::vector<double> sim_calibrated;  // per repetition: with that run's measured overheads
  std::vector<double> overrun;         // per repetition: mean compute-action overrun, seconds
  double sim_bubble = 0;       // per stage (schedule/bubble.h)
  double sim_step_bubble = 0;  // 1 - work / (workers x step)
  double sim_peak = 0;        // units (max over workers)
  std::vector<double> measured_step;  // seconds, one per repetition (median over steps)
  double measured_bubble = 0;       // per stage, of the last repetition's median step
  double measured_step_bubble = 0;  // 1 - work / (workers x step), same step
  double measured_peak = 0;   // units
};
struct Comparison {
  int p = 0, m = 0;
  std::vector<ScheduleRun> runs;
};

Section GenerationSpeed(const SuiteOptions& options);
Section EmulatedComparison(const SuiteOptions& options, std::vector<Comparison>* results);
Section CpuComparison(const SuiteOptions& options);
// Clipping on vs off for V-ZB and ZB-H1 with real CPU compute (clip_comparison.cc).
Section ClippingComparison(const SuiteOptions& options);
Section Frontier(const SuiteOptions& options, const std::vector<Comparison>& emulated);
Section Offload(const SuiteOptions& options);
Section TransportAndKernels(const SuiteOptions& options);
// `pipetrain generate`'s tokens/s with and without the KV cache (sampling_speed.cc).
Section SamplingSpeed(const SuiteOptions& options);

// The fixed job's spec for schedule `name`: p workers, m microbatches, F = B = W = `unit` per
// worker share. v-adaptive and auto search under a memory limit of ceil(5/8 p) units (40 at
// p = 64, the limit the earlier hand-run V benchmarks used); the others are unlimited.
schedule::PipelineSpec SuiteSpec(const std::string& name, int p, int m, double unit = 1.0);

// Formatting helpers.
std::string Ms(double seconds);          // "12.3" (ms, 3 significant digits or 1 decimal)
std::string Fixed(double v, int digits);

}  // namespace pipetrain::bench

#endif  // PIPETRAIN_BENCH_SUITE_SUITE_H_
