#include "common/grpc_server_metrics.h"

#include <grpcpp/support/interceptor.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pipetrain {
namespace {

// 0.5 ms to 5 min: unary control calls take milliseconds, Prepare and Watch streams minutes.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return *buckets;
}

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(GrpcServerMetrics* metrics, const char* method)
      : metrics_(metrics),
        labels_(metrics->Started(method)),
        start_ns_(metrics->clock()->NowNs()) {}

  ~MetricsInterceptor() override {
    if (!done_) Finish(grpc::StatusCode::CANCELLED);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!done_ && methods->QueryInterceptionHookPoint(
                      grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Finish(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Finish(grpc::StatusCode code) {
    done_ = true;
    const double seconds = static_cast<double>(metrics_->clock()->NowNs() - start_ns_) * 1e-9;
    metrics_->Handled(labels_, code, seconds);
  }

  GrpcServerMetrics* const metrics_;
  const std::pair<std::string, std::string> labels_;
  const int64_t start_ns_;
  bool done_ = false;
};

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(GrpcServerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info->method());
  }

 private:
  GrpcServerMetrics* const metrics_;
};

}  // namespace

GrpcServerMetrics::GrpcServerMetrics(prometheus::Registry& registry, const Clock* clock)
    : clock_(clock),
      started_(prometheus::BuildCounter()
                   .Name("pipetrain_grpc_server_started_total")
                   .Help("RPCs this server began, by service and method.")
                   .Register(registry)),
      handled_(prometheus::BuildCounter()
                   .Name("pipetrain_grpc_server_handled_total")
                   .Help("RPCs this server answered, by service, method and status code.")
                   .Register(registry)),
      seconds_(prometheus::BuildHistogram()
                   .Name("pipetrain_grpc_server_handling_seconds")
                   .Help("Time from an RPC's start to its status (a stream's whole life), by "
                         "service and method.")
                   .Register(registry)) {}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
GrpcServerMetrics::MakeInterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(this);
}

std::pair<std::string, std::string> GrpcServerMetrics::Started(const char* full_method) {
  absl::string_view name = full_method == nullptr ? "" : full_method;
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  const size_t slash = name.rfind('/');
  std::pair<std::string, std::string> labels =
      slash == absl::string_view::npos
          ? std::make_pair(std::string("unknown"), std::string(name.empty() ? "unknown" : name))
          : std::make_pair(std::string(name.substr(0, slash)), std::string(name.substr(slash + 1)));
  {
    absl::MutexLock lock(&mu_);
    if (methods_.count(labels) == 0) {
      if (static_cast<int>(methods_.size()) >= kMaxMethods) {
        labels = {"other", "other"};
      }
      methods_.insert(labels);
    }
  }
  started_.Add({{"grpc_service", labels.first}, {"grpc_method", labels.second}}).Increment();
  return labels;
}

void GrpcServerMetrics::Handled(const std::pair<std::string, std::string>& service_method,
                                grpc::StatusCode code, double seconds) {
  const std::string code_name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  handled_
      .Add({{"grpc_service", service_method.first},
            {"grpc_method", service_method.second},
            {"grpc_code", code_name.empty() ? "UNKNOWN" : code_name}})
      .Increment();
  seconds_.Add({{"grpc_service", service_method.first}, {"grpc_method", service_method.second}},
               LatencyBuckets())
      .Observe(seconds);
}

}  // namespace pipetrain
