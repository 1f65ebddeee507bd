// NetworkNamespace (tests): a network namespace joined to this one by a veth pair, so a daemon
// started inside it (`ip netns exec`) can be cut off and reconnected like a partitioned pod.
// The host side gets 10.201.N.1, the namespace 10.201.N.2 (/24). Needs root (CAP_NET_ADMIN) and
// iproute2; Create says why not otherwise, so tests can skip.
//
// Thread-safety: not thread-safe.
#ifndef PIPETRAIN_TESTS_E2E_NETWORK_NAMESPACE_H_
#define PIPETRAIN_TESTS_E2E_NETWORK_NAMESPACE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pipetrain::testing {

class NetworkNamespace {
 public:
  // A new namespace with a unique name (from the pid); removed, with its veth pair, on delete.
  static absl::StatusOr<std::unique_ptr<NetworkNamespace>> Create();
  ~NetworkNamespace();

  const std::string& name() const { return name_; }
  const std::string& host_ip() const { return host_ip_; }       // this namespace's end
  const std::string& inside_ip() const { return inside_ip_; }   // the namespace's end
  // `argv` run inside the namespace (prefix for Spawn).
  std::vector<std::string> Exec(std::vector<std::string> argv) const;

  // Takes the link down (packets are dropped, connections stall as in a partition) or up.
  absl::Status SetConnected(bool connected) const;

 private:
  NetworkNamespace(std::string name, std::string host_if, std::string host_ip,
                   std::string inside_ip)
      : name_(std::move(name)),
        host_if_(std::move(host_if)),
        host_ip_(std::move(host_ip)),
        inside_ip_(std::move(inside_ip)) {}

  const std::string name_;
  const std::string host_if_;
  const std::string host_ip_;
  const std::string inside_ip_;
};

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_NETWORK_NAMESPACE_H_
