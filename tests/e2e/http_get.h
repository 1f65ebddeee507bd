// A minimal HTTP/1.0 GET over a loopback socket, for tests that read /metrics or query a
// Prometheus server's HTTP API (no curl dependency).
// Thread-safety: pure function.
#ifndef PIPETRAIN_TESTS_E2E_HTTP_GET_H_
#define PIPETRAIN_TESTS_E2E_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace pipetrain::testing {

// GET http://host:port/path; returns the body of a 200 response.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path);

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_E2E_HTTP_GET_H_
