// GrpcServerMetrics: Prometheus series for every RPC a gRPC server answers, recorded by a server
// interceptor (prometheus-cpp has none; gRPC's own OpenCensus plugin is not in Debian):
//   pipetrain_grpc_server_started_total{grpc_service,grpc_method}        counter: RPCs begun
//   pipetrain_grpc_server_handled_total{grpc_service,grpc_method,grpc_code}   counter: RPCs answered, by status
//                                                              code name (OK, NOT_FOUND, ...)
//   pipetrain_grpc_server_handling_seconds{grpc_service,grpc_method}     histogram: start to status (for
//                                                              a server stream: its whole life)
// grpc_service is the full service name ("pipetrain.v1.JobService"), grpc_method the bare method
// name, grpc_code the status code name (not `service` / `code`: Kubernetes service discovery
// sets a `service` target label, which would rename ours).
// Only registered methods reach interceptors; past kMaxMethods distinct methods the rest are
// counted as grpc_method "other", so a server's label set stays bounded whatever clients send.
// Started minus handled is the RPCs in flight; an RPC that ends without sending a status (the
// client went away) is counted with code CANCELLED.
//
// Usage: ServerBuilder::experimental().SetInterceptorCreators with MakeInterceptorFactory();
// the factory refers to this object, which must outlive the server.
//
// Thread-safety: thread-safe.
#ifndef PIPETRAIN_COMMON_GRPC_SERVER_METRICS_H_
#define PIPETRAIN_COMMON_GRPC_SERVER_METRICS_H_

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace pipetrain {

class GrpcServerMetrics {
 public:
  static constexpr int kMaxMethods = 64;

  // Registers the three families in `registry`. `clock` times the RPCs (never null).
  explicit GrpcServerMetrics(prometheus::Registry& registry, const Clock* clock = Clock::Real());

  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeInterceptorFactory();

  // What the interceptor calls; public for it. `full_method`: "/package.Service/Method".
  // Returns the labels the RPC is counted under.
  std::pair<std::string, std::string> Started(const char* full_method);
  void Handled(const std::pair<std::string, std::string>& service_method, grpc::StatusCode code,
               double seconds);
  const Clock* clock() const { return clock_; }

 private:
  const Clock* const clock_;
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Counter>& handled_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  absl::Mutex mu_;
  std::set<std::pair<std::string, std::string>> methods_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_GRPC_SERVER_METRICS_H_
