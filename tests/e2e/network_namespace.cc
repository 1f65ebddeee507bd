#include "tests/e2e/network_namespace.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pipetrain::testing {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";

// Runs `command` through the shell, output discarded; its exit code.
int Run(const std::string& command) {
  const int status = std::system((command + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetworkNamespace>> NetworkNamespace::Create() {
  if (geteuid() != 0) return absl::UnavailableError("network namespaces need root");
  if (access(kIp, X_OK) != 0) {
    return absl::UnavailableError(absl::StrCat("iproute2 is not installed (no ", kIp, ")"));
  }
  const int id = getpid() % 100000;
  const int subnet = getpid() % 250 + 1;
  const std::string name = absl::StrCat("pt-netns-", id);
  const std::string host_if = absl::StrCat("ptvh", id), inside_if = absl::StrCat("ptvn", id);
  const std::string host_ip = absl::StrCat("10.201.", subnet, ".1");
  const std::string inside_ip = absl::StrCat("10.201.", subnet, ".2");
  Run(absl::StrCat("ip netns del ", name));  // a leftover of a killed run
  Run(absl::StrCat("ip link del ", host_if));
  if (Run(absl::StrCat("ip netns add ", name)) != 0) {
    return absl::UnavailableError("`ip netns add` failed (no CAP_NET_ADMIN in this container?)");
  }
  auto ns = std::unique_ptr<NetworkNamespace>(
      new NetworkNamespace(name, host_if, host_ip, inside_ip));
  const std::string in = absl::StrCat("ip netns exec ", name, " ");
  const std::vector<std::string> setup = {
      absl::StrCat("ip link add ", host_if, " type veth peer name ", inside_if),
      absl::StrCat("ip link set ", inside_if, " netns ", name),
      absl::StrCat("ip addr add ", host_ip, "/24 dev ", host_if),
      absl::StrCat("ip link set ", host_if, " up"),
      absl::StrCat(in, "ip addr add ", inside_ip, "/24 dev ", inside_if),
      absl::StrCat(in, "ip link set ", inside_if, " up"),
      absl::StrCat(in, "ip link set lo up"),
  };
  for (const std::string& command : setup) {
    if (Run(command) != 0) return absl::UnavailableError(absl::StrCat("failed: ", command));
  }
  return ns;
}

NetworkNamespace::~NetworkNamespace() {
  Run(absl::StrCat("ip link del ", host_if_));  // removes both ends
  Run(absl::StrCat("ip netns del ", name_));
}

std::vector<std::string> NetworkNamespace::Exec(std::vector<std::string> argv) const {
  std::vector<std::string> out = {kIp, "netns", "exec", name_};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

absl::Status NetworkNamespace::SetConnected(bool connected) const {
  const std::string command =
      absl::StrCat("ip link set ", host_if_, connected ? " up" : " down");
  if (Run(command) != 0) return absl::InternalError(absl::StrCat("failed: ", command));
  return absl::OkStatus();
}

}  // namespace pipetrain::testing
