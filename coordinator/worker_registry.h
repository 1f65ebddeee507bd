// WorkerRegistry: the workers the coordinator knows about. Workers register (device kind, memory,
// addresses, a stable name: re-registering the same name keeps its id) and then heartbeat; a
// worker whose last heartbeat is older than the heartbeat timeout is LOST. With credentials
// issued, each registration gets fresh tokens the gRPC adapters check (docs/security.md); a
// live worker's name is never re-bound to another address. Jobs acquire idle workers (they
// become BUSY with that job) and release them when the job ends.
//
// A busy worker that is lost (missed heartbeats, or re-registered because it restarted) is
// reported to the lost listener with its job, so the job manager can fail or recover that job.
// Listeners are called without any registry lock held.
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COORDINATOR_WORKER_REGISTRY_H_
#define PIPETRAIN_COORDINATOR_WORKER_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pipetrain/v1/common.pb.h"

namespace pipetrain::coordinator {

class CoordinatorMetrics;

struct WorkerRegistration {
  std::string name;               // stable; empty means the address.
  std::string address;            // host:port of the worker's Worker gRPC service.
  std::string transport_address;  // host:port peers connect to; empty means `address`.
  std::string metrics_address;
  v1::DeviceKind device = v1::DEVICE_KIND_UNSPECIFIED;
  int64_t device_memory_bytes = 0;
  int64_t host_memory_bytes = 0;
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  std::string host;         // machine name; CPU workers of one host share its cores
  std::string zone;         // zone / rack label (placement.h); empty: unknown
  int cpu_cores = 0;        // 0: unknown
  int compute_threads = 0;  // 0 means 1
  int device_index = 0;     // CUDA ordinal on `host`
  std::string device_name;
  std::string compute_capability;
  double core_sgemm_flops_per_s = 0;  // CPU: one core's measured sgemm rate; 0: not measured
};

enum class WorkerState { kIdle, kBusy, kLost };
const char* WorkerStateName(WorkerState state);  // "idle", "busy", "lost"

struct WorkerInfo {
  std::string id;  // "worker-000003"
  WorkerRegistration registration;
  WorkerState state = WorkerState::kIdle;
  std::string job_id;  // while assigned to a job (busy, or lost before the job released it)
  absl::Time last_heartbeat;
  // Issued at each registration when the registry issues credentials (else empty): what the
  // worker presents on its heartbeats and reports, and what the coordinator presents to it.
  std::string session_token;
  std::string coordinator_token;
};

struct HeartbeatResult {
  bool reregister = false;                 // unknown worker id
  std::vector<std::string> abort_job_ids;  // jobs the worker runs that it should not
};

struct WorkerRegistryOptions {
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  // Issue a session token and a coordinator token at every registration (the coordinator does
  // when it has a cluster secret; docs/security.md).
  bool issue_credentials = false;
};

// "host:port" with a port in 1..65535 and a host that is a DNS name, an IPv4 address or a
// bracketed IPv6 address (no '/', spaces or empty labels).
bool IsHostPort(const std::string& address);

class WorkerRegistry {
 public:
  // (worker id, job id, reason) of a busy worker that was lost.
  using LostListener =
      std::function<void(const std::string&, const std::string&, const std::string&)>;
  // Called when a worker may have become available (registered, released, came back).
  using AvailableListener = std::function<void()>;

  explicit WorkerRegistry(const WorkerRegistryOptions& options,
                          CoordinatorMetrics* metrics = nullptr);

  // Set before the registry is shared.
  void SetListeners(LostListener on_lost, AvailableListener on_available);

  // InvalidArgument naming the field for a bad registration; FailedPrecondition for a name held
  // by a live worker at another address (a name is re-bound only once its holder is lost or
  // left). Returns the worker id.
  absl::StatusOr<std::string> Register(const WorkerRegistration& registration);
  // The worker with this id, if registered.
  std::optional<WorkerInfo> Get(const std::string& worker_id) const;
  // The worker whose session token this is (its latest registration's); nullopt when none is.
  std::optional<std::string> WorkerWithSessionToken(absl::string_view token) const;
  // The coordinator token of the worker at this Worker service address, a live one first (""
  // when none is there, or no credentials are issued).
  std::string CoordinatorTokenFor(const std::string& address) const;
  // How often workers should heartbeat: a fifth of the timeout.
  absl::Duration heartbeat_interval() const;
  absl::Duration heartbeat_timeout() const { return options_.heartbeat_timeout; }
  // `job_id`: the job the worker says it runs (empty when idle). `leaving`: the worker is
  // shutting down; it becomes LOST at once (the lost listener hears of its job). `name` (empty:
  // not checked): the name it registered with; an id registered under another name is another
  // worker's (ids restart with the coordinator): reregister, and nothing else changes.
  HeartbeatResult Heartbeat(const std::string& worker_id, const std::string& job_id,
                            bool leaving = false, const std::string& name = "");
  // A worker found unreachable (an Abort to it failed): LOST, so no job is given it until it
  // heartbeats again. The lost listener is not called (the caller already handles its job).
  void MarkLost(const std::string& worker_id);
  // Marks workers without a heartbeat for longer than the timeout LOST (calls the lost listener
  // for busy ones).
  void ExpireLost();

  // Takes `count` idle workers of device `kind` (longest registered first) for `job_id`, or
  // FailedPrecondition if there are fewer. They become BUSY. UNSPECIFIED: all of one kind, the
  // first of CUDA, CPU, EMULATED with enough idle workers.
  absl::StatusOr<std::vector<WorkerInfo>> Acquire(
      int count, const std::string& job_id, v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED);
  // Every worker assigned to `job_id` is unassigned: busy ones become idle.
  void Release(const std::string& job_id);

  struct Counts {
    int idle = 0, busy = 0, lost = 0;
  };
  // Of device `kind` only, unless UNSPECIFIED.
  Counts CountByState(v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED) const;
  std::vector<WorkerInfo> List() const;  // by id

 private:
  void PublishCountsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerRegistryOptions options_;
  CoordinatorMetrics* const metrics_;
  LostListener on_lost_;
  AvailableListener on_available_;

  mutable absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);  // by id
  absl::flat_hash_map<std::string, std::string> id_by_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain::coordinator

#endif  // PIPETRAIN_COORDINATOR_WORKER_REGISTRY_H_
