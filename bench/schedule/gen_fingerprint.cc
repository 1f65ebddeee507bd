// gen_fingerprint: times Generate(name, spec) and prints what the plan is -- simulated step time
// (with transfers), peak activation memory and a hash of every worker's compute order -- so a
// change to a generator's speed can be checked to leave its plans unchanged (same hash) or
// better (shorter step at no more memory). One line per case:
//   gen_fingerprint NAME P M [B W COMM MEMORY_LIMIT [REPEATS]]   (F = 1)
//   gen_fingerprint --cases FILE     (one "NAME P M B W COMM MEMORY_LIMIT" per line)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <ctime>

#include "common/heap_policy.h"
#include "schedule/generator.h"
#include "schedule/passes.h"
#include "schedule/simulator.h"

namespace {

using pipetrain::schedule::PipelineSpec;

// This process's CPU time: less disturbed than the wall clock on a shared machine.
double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

uint64_t Hash(const pipetrain::schedule::Schedule& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
  for (const auto& actions : s.worker_actions) {
    mix(0xffff);
    for (const auto& a : actions) {
      mix(static_cast<uint64_t>(a.kind));
      mix(static_cast<uint64_t>(a.stage));
      mix(static_cast<uint64_t>(a.microbatch));
    }
  }
  return h;
}

int RunCase(const std::string& name, const PipelineSpec& spec, int repeats) {
  std::vector<double> times, cpu;
  absl::StatusOr<pipetrain::schedule::Schedule> s;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = CpuSeconds();
    s = pipetrain::schedule::Generate(name, spec);
    cpu.push_back(CpuSeconds() - cpu_start);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!s.ok()) break;
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("%-18s p=%-3d m=%-5d b=%g w=%g c=%g lim=%g  ", name.c_str(), spec.num_workers,
              spec.num_microbatches, spec.b, spec.w, spec.comm, spec.memory_limit);
  if (!s.ok()) {
    std::printf("refused: %s\n", std::string(s.status().message()).substr(0, 80).c_str());
    return 0;
  }
  auto plan = pipetrain::schedule::AddTransfers(*s);
  auto sim = pipetrain::schedule::Simulate(
      *plan, pipetrain::schedule::CostModelFor(spec, s->ChunksPerWorker()));
  if (!plan.ok() || !sim.ok()) {
    std::printf("simulation failed\n");
    return 1;
  }
  const double peak = *std::max_element(sim->peak_memory.begin(), sim->peak_memory.end());
  std::printf("step=%.9g peak=%.9g hash=%016llx  ms=%.2f cpu_ms=%.2f cpu_min=%.2f\n", sim->makespan, peak,
              static_cast<unsigned long long>(Hash(*s)), times[times.size() / 2] * 1e3,
              cpu[cpu.size() / 2] * 1e3, cpu.front() * 1e3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pipetrain::KeepFreedMemoryInHeap();  // as the coordinator and the CLI, which generate plans
  if (argc >= 3 && std::string(argv[1]) == "--cases") {
    std::ifstream in(argv[2]);
    std::string line;
    int repeats = argc >= 4 ? std::atoi(argv[3]) : 1;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string name;
      PipelineSpec spec;
      ls >> name >> spec.num_workers >> spec.num_microbatches >> spec.b >> spec.w >> spec.comm >>
          spec.memory_limit;
      RunCase(name, spec, repeats);
      std::fflush(stdout);
    }
    return 0;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: gen_fingerprint NAME P M [B W COMM LIMIT [REPEATS]] | --cases FILE [REPEATS]\n");
    return 2;
  }
  PipelineSpec spec;
  spec.num_workers = std::atoi(argv[2]);
  spec.num_microbatches = std::atoi(argv[3]);
  if (argc > 4) spec.b = std::atof(argv[4]);
  if (argc > 5) spec.w = std::atof(argv[5]);
  if (argc > 6) spec.comm = std::atof(argv[6]);
  if (argc > 7) spec.memory_limit = std::atof(argv[7]);
  const int repeats = argc > 8 ? std::atoi(argv[8]) : 3;
  return RunCase(argv[1], spec, repeats);
}
