#include <unistd.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "bench/suite/suite.h"

namespace pipetrain::bench {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "unknown CPU";
}

double MemTotalGiB() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kb;
      break;
    }
    in.ignore(1 << 10, '\n');
  }
  return kb / (1024.0 * 1024.0);
}

}  // namespace

std::string Stamp::Line() const { return absl::StrCat(date, "; ", machine, "; ", load); }

Stamp Now() {
  Stamp s;
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  s.date = buf;
  s.machine = absl::StrFormat("%d cores (%s), %.1f GiB memory",
                              static_cast<int>(std::thread::hardware_concurrency()), CpuModel(),
                              MemTotalGiB());
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  s.load = absl::StrFormat("load average %.2f %.2f %.2f", a, b, c);
  return s;
}

std::string Provenance(const SuiteOptions& options, const Stamp& start, const Stamp& end) {
  return absl::StrCat("*Measured ", start.date, " to ", end.date.substr(11), " on ", start.machine,
                      "; ", start.load, " at the start, ", end.load.substr(13),
                      " at the end. Command: `", options.command, "`",
                      options.quick ? " (quick mode: smoke-test sizes, not meaningful numbers)"
                                    : "",
                      ".*\n\n");
}

std::vector<std::string> Caption(const SuiteOptions& options, const Stamp& start,
                                 const Stamp& end) {
  return {absl::StrCat(start.date, " to ", end.date.substr(11), "; ", start.machine),
          absl::StrCat(start.load, " (start), ", end.load.substr(13), " (end)"),
          absl::StrCat("command: ", options.command, options.quick ? " (quick mode)" : "")};
}

schedule::PipelineSpec SuiteSpec(const std::string& name, int p, int m, double unit) {
  schedule::PipelineSpec spec;
  spec.num_workers = p;
  spec.num_microbatches = m;
  spec.f = spec.b = spec.w = unit;
  if (name == "v-adaptive" || name == "auto") spec.memory_limit = std::ceil(0.625 * p);
  return spec;
}

std::string Ms(double seconds) {
  const double ms = seconds * 1e3;
  if (ms >= 100) return absl::StrFormat("%.0f", ms);
  if (ms >= 10) return absl::StrFormat("%.1f", ms);
  if (ms >= 1) return absl::StrFormat("%.2f", ms);
  return absl::StrFormat("%.3f", ms);
}

std::string Fixed(double v, int digits) {
  if (std::abs(v) < 0.5 * std::pow(10.0, -digits)) v = 0;  // no "-0.000"
  return absl::StrFormat("%.*f", digits, v);
}

}  // namespace pipetrain::bench
