#include "common/build_info.h"

#include <prometheus/gauge.h>

#include "common/version.h"

namespace pipetrain {

void RegisterBuildInfo(prometheus::Registry& registry, const std::string& program) {
  prometheus::BuildGauge()
      .Name("pipetrain_build_info")
      .Help("Always 1: the program, project version and git revision of this process's build.")
      .Register(registry)
      .Add({{"program", program}, {"version", ProjectVersion()}, {"revision", GitRevision()}})
      .Set(1);
}

}  // namespace pipetrain
