// JobClient: the client side of the coordinator's JobService, with errors as absl::Status
// (a gRPC status converts 1:1), an optional bearer token and optional TLS (server verified
// against a CA; a client certificate for mutual TLS).
//
// Thread-safety: thread-safe (gRPC stubs are).
#ifndef PIPETRAIN_CLIENT_JOB_CLIENT_H_
#define PIPETRAIN_CLIENT_JOB_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pipetrain/v1/coordinator.grpc.pb.h"

namespace pipetrain::client {

// PEM files for a TLS connection to the coordinator. All empty: plaintext. `ca_file` (or
// `cert_file`) set: TLS, the coordinator's certificate verified against `ca_file` (the system
// roots when empty) and its address. `cert_file` + `key_file` (both or neither): the client
// certificate presented for mutual TLS.
struct ClientTls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;

  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

class JobClient {
 public:
  // The largest response it accepts (a GetJob or GetStepTrace of a big job), bytes.
  static constexpr int kMaxReceiveBytes = 256 << 20;

  // `address` host:port; `token` empty for none; `deadline` bounds every unary call. A TLS
  // file that cannot be read does not throw: every call then returns that error
  // (INVALID_ARGUMENT naming the flag).
  JobClient(const std::string& address, std::string token, const ClientTls& tls = {},
            absl::Duration deadline = absl::Seconds(30));

  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> Get(const std::string& job_id);
  absl::StatusOr<std::vector<v1::Job>> List(v1::JobState state);
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  absl::StatusOr<v1::Plan> Plan(const v1::JobSpec& spec);
  // The coordinator's registered workers, by id.
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers();
  // A kept step's measured timeline; `step` -1 is the newest kept step.
  absl::StatusOr<v1::StepTrace> GetStepTrace(const std::string& job_id, int step);
  // Streams events until the job ends (OK), `on_event` returns false (Cancelled), or the
  // stream breaks (its status).
  absl::Status Watch(const std::string& job_id,
                     const std::function<bool(const v1::JobEvent&)>& on_event);

 private:
  void Prepare(grpc::ClientContext* context, bool with_deadline) const;

  const std::string address_;
  absl::Status init_status_;  // a bad TLS file; stub_ is null then
  std::unique_ptr<v1::JobService::Stub> stub_;
  const std::string token_;
  const absl::Duration deadline_;
};

}  // namespace pipetrain::client

#endif  // PIPETRAIN_CLIENT_JOB_CLIENT_H_
