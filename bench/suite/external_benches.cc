// Transport bandwidth and kernel efficiency: the existing bench programs, run in a reduced
// configuration, their results gathered here.
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suite/suite.h"
#include "nlohmann/json.hpp"

namespace pipetrain::bench {
namespace {

// Runs `command`, returns its stdout (and whether it exited 0).
bool RunCapture(const std::string& command, std::string* out) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out->append(buf, n);
  return ::pclose(pipe) == 0;
}

std::string TransportSection(const SuiteOptions& options) {
  const Stamp start = Now();
  const std::string command =
      absl::StrCat(options.transport_bench, " --repeats ", options.quick ? 1 : 2);
  std::string out;
  const bool ok = RunCapture(command + " 2>&1", &out);
  const Stamp end = Now();
  return absl::StrCat(
      "### Transport: TcpTransport vs a raw socket, two processes on loopback\n\n",
      Provenance(options, start, end), "Run by the suite as `", command,
      "` (bench/transport: 256 MiB per (size, method) run, best of the repeats, interleaved; "
      "ratio = TcpTransport / raw socket on the same bytes in the same run).\n\n",
      ok ? out : absl::StrCat("**failed**:\n\n```\n", out, "\n```\n"), "\n");
}

std::string KernelsSection(const SuiteOptions& options) {
  const Stamp start = Now();
  // Quick: the sgemm yardstick and one chunk pass only.
  const std::string filter = options.quick ? "BM_Sgemm/512|BM_LayerNorm" : "";
  const std::string command = absl::StrCat(
      options.kernels_bench, " --benchmark_format=json --benchmark_min_time=",
      options.quick ? "0.01" : "0.2", filter.empty() ? "" : " --benchmark_filter='" + filter + "'");
  std::string out;
  const bool ok = RunCapture(command + " 2>/dev/null", &out);
  const Stamp end = Now();
  std::string md = absl::StrCat("### Compute: kernels and chunks against the sgemm yardstick\n\n",
                                Provenance(options, start, end), "Run by the suite as `", command,
                                "` (bench/kernels; OpenBLAS 1 thread; GFLOP/s = analytic GEMM "
                                "FLOPs / wall time; efficiency = GFLOP/s / the best sgemm rate "
                                "measured in the same run; not given for the elementwise kernels, whose FLOP "
                                "counts are nominal).\n\n");
  nlohmann::json json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!ok || json.is_discarded() || !json.contains("benchmarks")) {
    return absl::StrCat(md, "**failed** (no JSON from kernels_bench)\n\n");
  }
  double yardstick = 0;
  for (const auto& b : json["benchmarks"]) {
    const std::string name = b.value("name", "");
    if (name.rfind("BM_Sgemm", 0) == 0 && b.contains("GFLOPS")) {
      yardstick = std::max(yardstick, b["GFLOPS"].get<double>());
    }
  }
  md += "| benchmark | label | wall time | GFLOP/s | efficiency vs best sgemm |\n|---|---|---|---|---|\n";
  for (const auto& b : json["benchmarks"]) {
    const double gflops = b.contains("GFLOPS") ? b["GFLOPS"].get<double>() : 0;
    // Elementwise kernels report a nominal FLOP count; a GEMM yardstick says nothing about them.
    const std::string name = b.value("name", "");
    const bool gemm = name.rfind("BM_LayerNorm", 0) != 0 && name.rfind("BM_Gelu", 0) != 0 &&
                      name.rfind("BM_CrossEntropy", 0) != 0;
    absl::StrAppend(&md, "| ", name, " | ", b.value("label", ""), " | ",
                    absl::StrFormat("%.*f %s", b.value("real_time", 0.0) >= 100 ? 0 : 2,
                                    b.value("real_time", 0.0), b.value("time_unit", "")),
                    " | ", gflops > 0 ? absl::StrFormat("%.2f", gflops) : "-", " | ",
                    gemm && gflops > 0 && yardstick > 0 ? absl::StrFormat("%.0f%%", 100 * gflops / yardstick)
                                                : "-",
                    " |\n");
  }
  return md + "\n";
}

}  // namespace

Section TransportAndKernels(const SuiteOptions& options) {
  Section section;
  section.markdown = "## Transport bandwidth and kernel efficiency\n\n";
  if (options.transport_bench.empty()) {
    section.markdown += "Transport: skipped (no --transport-bench given).\n\n";
  } else {
    section.markdown += TransportSection(options);
  }
  if (options.kernels_bench.empty()) {
    section.markdown += "Compute: skipped (no --kernels-bench given).\n\n";
  } else {
    section.markdown += KernelsSection(options);
  }
  return section;
}

}  // namespace pipetrain::bench
