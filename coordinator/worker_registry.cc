#include "coordinator/worker_registry.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/secret.h"
#include "coordinator/metrics.h"

namespace pipetrain::coordinator {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// A DNS name or IPv4 address (labels of letters, digits, '-' and '_', none empty), or an IPv6
// address in brackets. Anything else ("../../etc/passwd", spaces, control bytes) is refused
// before it reaches a log line, a dial or a peer list.
bool IsHost(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
      return absl::ascii_isxdigit(c) || c == ':' || c == '.';
    });
  }
  if (host.empty() || host.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63) return false;
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
    }
  }
  return true;
}

constexpr absl::string_view kHostPortForms =
    " (host: a DNS name, an IPv4 address or a [bracketed] IPv6 address; port 1..65535)";

absl::Status ValidateRegistration(const WorkerRegistration& r) {
  if (r.address.empty()) return Bad("address", "required (host:port of the Worker service)");
  if (!IsHostPort(r.address)) {
    return Bad("address", absl::StrCat("\"", r.address, "\" is not host:port", kHostPortForms));
  }
  if (!r.transport_address.empty() && !IsHostPort(r.transport_address)) {
    return Bad("transport_address",
               absl::StrCat("\"", r.transport_address, "\" is not host:port", kHostPortForms));
  }
  if (!r.metrics_address.empty() && !IsHostPort(r.metrics_address)) {
    return Bad("metrics_address",
               absl::StrCat("\"", r.metrics_address, "\" is not host:port", kHostPortForms));
  }
  if (r.name.size() > 253) return Bad("name", "at most 253 characters");
  if (r.device == v1::DEVICE_KIND_UNSPECIFIED || !v1::DeviceKind_IsValid(r.device)) {
    return Bad("device", absl::StrCat(static_cast<int>(r.device),
                                      " is not allowed; allowed: DEVICE_KIND_CPU, "
                                      "DEVICE_KIND_CUDA, DEVICE_KIND_EMULATED"));
  }
  if (r.device_memory_bytes < 0) {
    return Bad("device_memory_bytes", absl::StrCat(r.device_memory_bytes, " is negative"));
  }
  if (r.host_memory_bytes < 0) {
    return Bad("host_memory_bytes", absl::StrCat(r.host_memory_bytes, " is negative"));
  }
  if (!std::isfinite(r.d2h_bytes_per_s) || r.d2h_bytes_per_s < 0) {
    return Bad("d2h_bytes_per_s", "must be finite and >= 0");
  }
  if (!std::isfinite(r.h2d_bytes_per_s) || r.h2d_bytes_per_s < 0) {
    return Bad("h2d_bytes_per_s", "must be finite and >= 0");
  }
  if (r.host.size() > 253) return Bad("host", "at most 253 characters");
  constexpr int kMaxCpus = 1 << 16;
  if (r.cpu_cores < 0 || r.cpu_cores > kMaxCpus) {
    return Bad("cpu_cores", absl::StrCat(r.cpu_cores, " is not allowed; allowed: 0..", kMaxCpus));
  }
  if (r.compute_threads < 0 || r.compute_threads > kMaxCpus) {
    return Bad("compute_threads",
               absl::StrCat(r.compute_threads, " is not allowed; allowed: 0..", kMaxCpus));
  }
  return absl::OkStatus();
}

}  // namespace

const char* WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kIdle:
      return "idle";
    case WorkerState::kBusy:
      return "busy";
    case WorkerState::kLost:
      return "lost";
  }
  return "?";
}

bool IsHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || address.size() > 300) return false;
  int port = 0;
  if (!absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port)) return false;
  return port >= 1 && port <= 65535 && IsHost(absl::string_view(address).substr(0, colon));
}

WorkerRegistry::WorkerRegistry(const WorkerRegistryOptions& options, CoordinatorMetrics* metrics)
    : options_(options), metrics_(metrics) {
  absl::MutexLock lock(&mu_);
  PublishCountsLocked();
}

void WorkerRegistry::SetListeners(LostListener on_lost, AvailableListener on_available) {
  on_lost_ = std::move(on_lost);
  on_available_ = std::move(on_available);
}

absl::Duration WorkerRegistry::heartbeat_interval() const { return options_.heartbeat_timeout / 5; }

absl::StatusOr<std::string> WorkerRegistry::Register(const WorkerRegistration& registration) {
  if (absl::Status s = ValidateRegistration(registration); !s.ok()) return s;
  WorkerRegistration r = registration;
  if (r.name.empty()) r.name = r.address;
  std::string id, lost_job;
  {
    absl::MutexLock lock(&mu_);
    auto it = id_by_name_.find(r.name);
    if (it != id_by_name_.end()) {
      id = it->second;
      // A live holder keeps its name: otherwise anyone could redirect its jobs to another
      // address. A restart at the same address re-registers at once; elsewhere, once the old
      // holder missed its heartbeats or left.
      const WorkerInfo& holder = workers_[id];
      const bool alive = holder.state != WorkerState::kLost &&
                         absl::Now() - holder.last_heartbeat <= options_.heartbeat_timeout;
      if (alive && holder.registration.address != r.address) {
        return absl::FailedPreconditionError(absl::StrCat(
            "name: \"", r.name, "\" is held by a live worker at ", holder.registration.address,
            " (last heartbeat ",
            absl::FormatDuration(absl::Trunc(absl::Now() - holder.last_heartbeat,
                                             absl::Milliseconds(1))),
            " ago); it can be registered at another address once that worker is gone"));
      }
    } else {
      id = absl::StrFormat("worker-%06d", next_id_++);
      id_by_name_[r.name] = id;
    }
    WorkerInfo& w = workers_[id];
    w.id = id;
    w.registration = r;
    w.last_heartbeat = absl::Now();
    if (options_.issue_credentials) {
      w.session_token = RandomToken();
      w.coordinator_token = RandomToken();
    }
    if (!w.job_id.empty()) {
      // It restarted while assigned to a job: that job lost this rank.
      if (w.state == WorkerState::kBusy) lost_job = w.job_id;
      w.state = WorkerState::kLost;
    } else {
      w.state = WorkerState::kIdle;
    }
    PublishCountsLocked();
  }
  if (!lost_job.empty() && on_lost_) {
    on_lost_(id, lost_job,
             absl::StrCat("worker ", id, " (", r.name,
                          ") re-registered while running the job (it restarted)"));
  }
  if (on_available_) on_available_();
  return id;
}

std::optional<WorkerInfo> WorkerRegistry::Get(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> WorkerRegistry::WorkerWithSessionToken(absl::string_view token) const {
  if (token.empty()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, w] : workers_) {
    if (SameSecret(w.session_token, token)) return id;
  }
  return std::nullopt;
}

std::string WorkerRegistry::CoordinatorTokenFor(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  std::string lost;  // a lost worker is still aborted (a partitioned one may hear it)
  for (const auto& [id, w] : workers_) {
    if (w.registration.address != address) continue;
    if (w.state != WorkerState::kLost) return w.coordinator_token;
    lost = w.coordinator_token;
  }
  return lost;
}

HeartbeatResult WorkerRegistry::Heartbeat(const std::string& worker_id, const std::string& job_id,
                                          bool leaving, const std::string& name) {
  HeartbeatResult result;
  bool available = false;
  std::string lost_job, lost_reason;
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || (!name.empty() && name != it->second.registration.name)) {
      result.reregister = !leaving;
      return result;
    }
    WorkerInfo& w = it->second;
    w.last_heartbeat = absl::Now();
    if (leaving) {
      if (w.state == WorkerState::kBusy) {
        lost_job = w.job_id;
        lost_reason =
            absl::StrCat("worker ", worker_id, " (", w.registration.name, ") is shutting down");
      }
      w.state = WorkerState::kLost;
      PublishCountsLocked();
    } else {
      if (w.state == WorkerState::kLost && w.job_id.empty()) {
        w.state = WorkerState::kIdle;
        available = true;
        PublishCountsLocked();
      }
      if (!job_id.empty() && (job_id != w.job_id || w.state != WorkerState::kBusy)) {
        result.abort_job_ids.push_back(job_id);
      }
    }
  }
  if (metrics_ != nullptr) metrics_->Heartbeat();
  if (!lost_job.empty() && on_lost_) on_lost_(worker_id, lost_job, lost_reason);
  if (available && on_available_) on_available_();
  return result;
}

void WorkerRegistry::MarkLost(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.state == WorkerState::kLost) return;
  it->second.state = WorkerState::kLost;
  PublishCountsLocked();
}

void WorkerRegistry::ExpireLost() {
  std::vector<std::pair<std::string, std::string>> lost;  // (worker, job)
  std::vector<std::string> reasons;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() - options_.heartbeat_timeout;
    bool changed = false;
    for (auto& [id, w] : workers_) {
      if (w.state == WorkerState::kLost || w.last_heartbeat >= deadline) continue;
      if (w.state == WorkerState::kBusy) {
        lost.emplace_back(id, w.job_id);
        reasons.push_back(absl::StrCat("worker ", id, " (", w.registration.name,
                                       ") missed heartbeats for ",
                                       absl::FormatDuration(options_.heartbeat_timeout)));
      }
      w.state = WorkerState::kLost;
      changed = true;
    }
    if (changed) PublishCountsLocked();
  }
  if (on_lost_) {
    for (size_t i = 0; i < lost.size(); ++i) on_lost_(lost[i].first, lost[i].second, reasons[i]);
  }
}

absl::StatusOr<std::vector<WorkerInfo>> WorkerRegistry::Acquire(int count,
                                                                const std::string& job_id,
                                                                v1::DeviceKind kind) {
  absl::MutexLock lock(&mu_);
  // Any kind: the first kind in this order with enough idle workers (a job's workers are all
  // of one kind).
  std::vector<v1::DeviceKind> kinds = {kind};
  if (kind == v1::DEVICE_KIND_UNSPECIFIED) {
    kinds = {v1::DEVICE_KIND_CUDA, v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_EMULATED};
  }
  std::vector<WorkerInfo*> idle;
  for (v1::DeviceKind k : kinds) {
    idle.clear();
    for (auto& [id, w] : workers_) {
      if (w.state == WorkerState::kIdle && w.registration.device == k) idle.push_back(&w);
    }
    if (static_cast<int>(idle.size()) >= count) break;
  }
  if (count < 1 || static_cast<int>(idle.size()) < count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "need ", count, " idle workers", kind == v1::DEVICE_KIND_UNSPECIFIED ? " of one kind" : "",
        kind == v1::DEVICE_KIND_UNSPECIFIED ? "" : absl::StrCat(" of kind ", v1::DeviceKind_Name(kind)),
        ", have ", idle.size()));
  }
  std::vector<WorkerInfo> taken;
  for (int i = 0; i < count; ++i) {
    idle[i]->state = WorkerState::kBusy;
    idle[i]->job_id = job_id;
    taken.push_back(*idle[i]);
  }
  PublishCountsLocked();
  return taken;
}

void WorkerRegistry::Release(const std::string& job_id) {
  bool available = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, w] : workers_) {
      if (w.job_id != job_id) continue;
      w.job_id.clear();
      if (w.state == WorkerState::kBusy) {
        w.state = WorkerState::kIdle;
        available = true;
      }
    }
    PublishCountsLocked();
  }
  if (available && on_available_) on_available_();
}

WorkerRegistry::Counts WorkerRegistry::CountByState(v1::DeviceKind kind) const {
  absl::MutexLock lock(&mu_);
  Counts c;
  for (const auto& [id, w] : workers_) {
    if (kind != v1::DEVICE_KIND_UNSPECIFIED && w.registration.device != kind) continue;
    c.idle += w.state == WorkerState::kIdle;
    c.busy += w.state == WorkerState::kBusy;
    c.lost += w.state == WorkerState::kLost;
  }
  return c;
}

std::vector<WorkerInfo> WorkerRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerInfo> list;
  for (const auto& [id, w] : workers_) list.push_back(w);
  return list;
}

void WorkerRegistry::PublishCountsLocked() const {
  if (metrics_ == nullptr) return;
  int idle = 0, busy = 0, lost = 0;
  for (const auto& [id, w] : workers_) {
    idle += w.state == WorkerState::kIdle;
    busy += w.state == WorkerState::kBusy;
    lost += w.state == WorkerState::kLost;
  }
  metrics_->SetWorkerCounts(idle, busy, lost);
}

}  // namespace pipetrain::coordinator
