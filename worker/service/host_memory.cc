#include "worker/service/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace pipetrain::worker {
namespace {

std::string ReadAll(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int64_t MemAvailableFromMeminfo(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);  // " kB" or nothing
    if (key == "MemAvailable:") {
      return absl::StripAsciiWhitespace(unit) == "kB" ? value * 1024 : value;
    }
  }
  return 0;
}

int64_t CgroupMemoryHeadroom(const std::string& memory_max, const std::string& memory_current) {
  int64_t limit = 0, used = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(memory_max), &limit) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(memory_current), &used)) {
    return -1;  // "max" (no limit), or no cgroup v2 files
  }
  return std::max<int64_t>(0, limit - used);
}

int64_t AvailableHostMemoryBytes() {
  int64_t available = MemAvailableFromMeminfo(ReadAll("/proc/meminfo"));
  const int64_t headroom = CgroupMemoryHeadroom(ReadAll("/sys/fs/cgroup/memory.max"),
                                                ReadAll("/sys/fs/cgroup/memory.current"));
  if (headroom >= 0) available = available > 0 ? std::min(available, headroom) : headroom;
  return available;
}

}  // namespace pipetrain::worker
