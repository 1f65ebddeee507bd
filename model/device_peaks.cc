#include "model/device_peaks.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pipetrain::model {
namespace {

bool HasToken(const std::vector<std::string>& tokens, absl::string_view token) {
  return std::find(tokens.begin(), tokens.end(), absl::AsciiStrToLower(token)) != tokens.end();
}

}  // namespace

const std::vector<GpuPeak>& GpuPeakTable() {
  // Dense (no structured sparsity) peaks from the vendor's data sheets, FLOP/s. Rows with a
  // variant come before their model's generic row, which matches any other variant.
  static const std::vector<GpuPeak>* table = new std::vector<GpuPeak>{
      {"H100", "PCIe", 51.2e12, 756.0e12},
      {"H100", "NVL", 60.0e12, 835.0e12},
      {"H100", "", 67.0e12, 989.4e12},  // SXM5 ("NVIDIA H100 80GB HBM3")
      {"H200", "NVL", 60.0e12, 835.0e12},
      {"H200", "", 67.0e12, 989.4e12},  // SXM
      {"GH200", "", 67.0e12, 989.4e12},
      {"A100", "", 19.5e12, 312.0e12},  // SXM4 and PCIe alike
      {"A10", "", 31.2e12, 125.0e12},
      {"A30", "", 10.3e12, 165.0e12},
      {"L4", "", 30.3e12, 121.0e12},
      {"L40S", "", 91.6e12, 362.05e12},
      {"L40", "", 90.5e12, 181.05e12},
      {"V100", "", 15.7e12, 0},  // no bf16
      {"T4", "", 8.1e12, 0},     // no bf16
  };
  return *table;
}

std::optional<double> GpuDensePeakFlops(absl::string_view device_name, v1::Precision precision) {
  std::vector<std::string> tokens =
      absl::StrSplit(absl::AsciiStrToLower(device_name), absl::ByAnyChar(" -_"), absl::SkipEmpty());
  for (const GpuPeak& row : GpuPeakTable()) {
    if (!HasToken(tokens, row.model)) continue;
    if (row.variant[0] != '\0' && !HasToken(tokens, row.variant)) continue;
    const double peak =
        precision == v1::PRECISION_BF16 ? row.bf16_flops_per_s : row.fp32_flops_per_s;
    if (peak <= 0) return std::nullopt;
    return peak;
  }
  return std::nullopt;
}

PeakFlops WorkerPeakFlops(const WorkerPeakInput& worker, v1::Precision precision) {
  PeakFlops peak;
  const bool bf16 = precision == v1::PRECISION_BF16;
  switch (worker.device) {
    case v1::DEVICE_KIND_CPU: {  // bf16 too: fp32 GEMMs on bf16-rounded inputs
      if (!(worker.core_sgemm_flops_per_s > 0)) {
        peak.source = "unknown: the CPU worker measured no sgemm rate";
        return peak;
      }
      int cores = std::max(1, worker.compute_threads);
      if (worker.cpu_cores > 0) cores = std::min(cores, worker.cpu_cores);
      peak.flops_per_s = worker.core_sgemm_flops_per_s * cores;
      peak.source = absl::StrFormat("cpu: %d core(s) x %.2f GFLOP/s measured sgemm", cores,
                                    worker.core_sgemm_flops_per_s / 1e9);
      return peak;
    }
    case v1::DEVICE_KIND_CUDA: {
      const char* kind = bf16 ? "bf16" : "fp32";
      if (std::optional<double> p = GpuDensePeakFlops(worker.device_name, precision)) {
        peak.flops_per_s = *p;
        peak.source = absl::StrFormat("%s: published dense %s peak %.1f TFLOP/s",
                                      worker.device_name, kind, *p / 1e12);
      } else {
        peak.source = absl::StrCat("unknown: no published dense ", kind, " peak for device \"",
                                   worker.device_name, "\"");
      }
      return peak;
    }
    default:
      peak.source = absl::StrCat("unknown: ", v1::DeviceKind_Name(worker.device),
                                 " workers have no peak");
      return peak;
  }
}

PeakFlops JobPeakFlops(const std::vector<WorkerPeakInput>& workers, v1::Precision precision) {
  PeakFlops job;
  if (workers.empty()) {
    job.source = "unknown: no workers";
    return job;
  }
  std::vector<std::string> sources;
  for (size_t r = 0; r < workers.size(); ++r) {
    const PeakFlops w = WorkerPeakFlops(workers[r], precision);
    if (!(w.flops_per_s > 0)) return PeakFlops{0, absl::StrCat("rank ", r, ": ", w.source)};
    job.flops_per_s += w.flops_per_s;
    if (std::find(sources.begin(), sources.end(), w.source) == sources.end()) {
      sources.push_back(w.source);
    }
  }
  job.source = absl::StrCat(workers.size(), " worker(s): ", absl::StrJoin(sources, "; "));
  return job;
}

}  // namespace pipetrain::model
