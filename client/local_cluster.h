// LocalCluster: a coordinator and N CPU workers as child processes on 127.0.0.1, for
// `pipetrain local` (the README's main job) and end-to-end tests. Each daemon picks free ports
// and prints them; the cluster reads them from the daemons' logs in `dir`. Each daemon leads
// its own process group, so a terminal's Ctrl-C reaches only the launcher, which decides how to
// stop them. Stop() (also the destructor) sends SIGTERM, waits, and kills what is left.
//
// Thread-safety: not thread-safe.
#ifndef PIPETRAIN_CLIENT_LOCAL_CLUSTER_H_
#define PIPETRAIN_CLIENT_LOCAL_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace pipetrain::client {

struct LocalClusterOptions {
  int workers = 4;
  std::string coordinator_bin;  // empty: found next to this executable (see FindBinary)
  std::string worker_bin;
  std::string dir;                            // logs and the job database; empty: a fresh temp dir
  bool emulate = false;                       // EMULATED worker compute (scale demos only)
  std::vector<std::string> coordinator_args;  // extra flags
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  const std::string& coordinator_address() const { return coordinator_address_; }
  const std::string& coordinator_metrics_address() const { return metrics_address_; }
  const std::vector<std::string>& worker_metrics_addresses() const { return worker_metrics_; }
  const std::string& dir() const { return dir_; }
  // Graceful stop: SIGTERM to workers then the coordinator; SIGKILL after `grace`.
  void Stop(absl::Duration grace = absl::Seconds(10));

 private:
  LocalCluster() = default;
  std::string dir_;
  std::string coordinator_address_;
  std::string metrics_address_;
  std::vector<std::string> worker_metrics_;
  subprocess::Process coordinator_;
  std::vector<subprocess::Process> workers_;
  bool stopped_ = false;
};

// Path of a sibling pipetrain binary: `name` next to this executable, in ../coordinator or
// ../worker of a build tree, or on PATH. NotFound names the places it looked.
absl::StatusOr<std::string> FindBinary(const std::string& name);

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_LOCAL_CLUSTER_H_
