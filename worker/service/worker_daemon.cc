#include "worker/service/worker_daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/grpc_server_metrics.h"
#include "common/malformed_request.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/device/compute_backend.h"
#include "worker/runtime/copy_bandwidth.h"
#include "worker/runtime/core_sgemm.h"
#include "worker/service/coordinator_client.h"
#include "worker/service/host_cpus.h"
#include "worker/service/worker_agent.h"
#include "worker/service/worker_metrics.h"
#include "worker/service/worker_service.h"

namespace pipetrain::worker {
namespace {

absl::StatusOr<std::pair<std::string, int>> HostPort(const std::string& flag,
                                                     const std::string& value) {
  const size_t colon = value.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", value, "\" is not host:port (port 0..65535)"));
  }
  return std::make_pair(value.substr(0, colon), port);
}

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read \"", path, "\""));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Server and coordinator-channel credentials from the TLS flags (see WorkerDaemonConfig).
struct DaemonTls {
  std::shared_ptr<grpc::ServerCredentials> server = grpc::InsecureServerCredentials();
  CoordinatorTls coordinator;
};

absl::StatusOr<DaemonTls> LoadTls(const WorkerDaemonConfig& config) {
  DaemonTls tls;
  const bool has_cert = !config.tls_cert_file.empty(), has_key = !config.tls_key_file.empty();
  if (has_cert != has_key) {
    return absl::InvalidArgumentError("--tls-cert / --tls-key: give both or neither");
  }
  if (!has_cert) {
    if (!config.tls_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-ca: needs --tls-cert and --tls-key (the coordinator of a TLS cluster calls its "
          "workers over TLS)");
    }
    return tls;
  }
  PT_ASSIGN_OR_RETURN(std::string cert, ReadPem("--tls-cert", config.tls_cert_file));
  PT_ASSIGN_OR_RETURN(std::string key, ReadPem("--tls-key", config.tls_key_file));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({key, cert});
  tls.coordinator.enabled = true;
  tls.coordinator.cert_chain_pem = cert;
  tls.coordinator.private_key_pem = key;
  if (!config.tls_ca_file.empty()) {
    PT_ASSIGN_OR_RETURN(std::string ca, ReadPem("--tls-ca", config.tls_ca_file));
    ssl.pem_root_certs = ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    tls.coordinator.root_certs_pem = ca;
  }
  tls.server = grpc::SslServerCredentials(ssl);
  return tls;
}

}  // namespace

absl::Status RunWorkerDaemon(const WorkerDaemonConfig& config) {
  if (config.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator: required (host:port of the coordinator)");
  }
  // TLS material first: a bad file must not leave ports bound.
  PT_ASSIGN_OR_RETURN(DaemonTls tls, LoadTls(config));
  PT_ASSIGN_OR_RETURN(auto transport_hp, HostPort("--transport-listen", config.transport_listen));
  PT_ASSIGN_OR_RETURN(auto listen_hp, HostPort("--listen", config.listen));
  PT_ASSIGN_OR_RETURN(auto listener, TcpListener::Bind(transport_hp.first, transport_hp.second));
  const std::string transport_address = absl::StrCat(transport_hp.first, ":", listener->port());

  JobSeriesOptions job_series;
  job_series.retention = config.job_metrics_retention;
  auto metrics = std::make_unique<WorkerMetrics>(job_series);
  RegisterBuildInfo(metrics->registry(), "pipetrain-worker");
  GrpcServerMetrics grpc_metrics(metrics->registry());
  std::unique_ptr<prometheus::Exposer> exposer;
  std::string metrics_address;
  if (!config.metrics_listen.empty()) {
    PT_ASSIGN_OR_RETURN(auto metrics_hp, HostPort("--metrics-listen", config.metrics_listen));
    exposer = std::make_unique<prometheus::Exposer>(config.metrics_listen);
    exposer->RegisterCollectable(metrics->collectable());
    metrics_address = absl::StrCat(metrics_hp.first, ":", exposer->GetListeningPorts().front());
  }

  std::unique_ptr<CoordinatorClient> coordinator =
      MakeGrpcCoordinatorClient(config.coordinator, absl::Seconds(10), tls.coordinator,
                                config.cluster_secret);
  WorkerAgentOptions options;
  options.name = config.name.empty() ? absl::StrCat("worker-", getpid()) : config.name;
  options.transport_address = transport_address;
  options.metrics_address = metrics_address;
  options.session = config.session;
  // Emulated compute sleeps: it uses no cores, so it never oversubscribes a host.
  options.device = config.session.emulate ? v1::DEVICE_KIND_EMULATED : config.session.device.kind;
  options.device_info = config.session.device;
  const HostCpus cpus = DetectHostCpus();
  options.host = config.host.empty() ? cpus.host : config.host;
  options.zone = config.zone;
  options.cpu_cores = cpus.cpus;
  options.compute_threads = std::max(1, config.session.blas_threads);
  options.profile_lock_path = "/tmp/pipetrain-profile.lock";
  {
    // The host link as this worker's copy engines see it (with its cap; a GPU's through its
    // copy streams and pinned memory), for offload planning.
    absl::StatusOr<std::unique_ptr<kernels::Backend>> probe = MakeComputeBackend(
        config.session.emulate ? DeviceInfo{} : config.session.device, ComputeBackendOptions{});
    absl::StatusOr<CopyBandwidth> link =
        probe.ok() ? MeasureCopyBandwidth(
                         probe->get(),
                         BackendCopierOptions(config.session.copy_bandwidth_bytes_per_s))
                   : absl::StatusOr<CopyBandwidth>(probe.status());
    if (link.ok()) {
      options.d2h_bytes_per_s = link->d2h_bytes_per_s;
      options.h2d_bytes_per_s = link->h2d_bytes_per_s;
      LOG(INFO) << "copy bandwidth: d2h " << link->d2h_bytes_per_s / 1e9 << " GB/s, h2d "
                << link->h2d_bytes_per_s / 1e9 << " GB/s";
    } else {
      LOG(WARNING) << "copy bandwidth not measured: " << link.status();
    }
  }
  if (options.device == v1::DEVICE_KIND_CPU) {
    // The MFU peak of a CPU worker (model/device_peaks.h): one core's sgemm rate, ~0.2 s.
    CoreSgemmOptions sgemm;
    sgemm.restore_blas_threads = config.session.blas_threads;
    if (absl::StatusOr<double> rate = MeasureCoreSgemmFlops(sgemm); rate.ok()) {
      options.core_sgemm_flops_per_s = *rate;
      LOG(INFO) << "one core's sgemm: " << *rate / 1e9 << " GFLOP/s";
    } else {
      LOG(WARNING) << "core sgemm rate not measured (MFU unknown): " << rate.status();
    }
  }
  WorkerAgent agent(options, coordinator.get(), std::move(listener), metrics.get());
  WorkerServiceImpl service(&agent);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(config.listen, tls.server, &grpc_port);
  builder.SetMaxReceiveMessageSize(256 << 20);  // whole plans of large jobs
  builder.RegisterService(&service);
  // In this order: the metrics count the status the malformed-request rewrite sends.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(NewMalformedRequestInterceptorFactory());
  interceptors.push_back(grpc_metrics.MakeInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot serve on ", config.listen));
  }
  const std::string grpc_address = absl::StrCat(listen_hp.first, ":", grpc_port);
  server->GetHealthCheckService()->SetServingStatus(true);
  // First lines of output: what tests and launchers read to find this worker.
  std::printf("listening on %s\ntransport on %s\n", grpc_address.c_str(),
              transport_address.c_str());
  if (!metrics_address.empty()) std::printf("metrics on %s\n", metrics_address.c_str());
  std::fflush(stdout);
  agent.Start(grpc_address);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  int received = 0;
  sigwait(&signals, &received);
  LOG(INFO) << "signal " << received << ": shutting down";
  server->GetHealthCheckService()->SetServingStatus(false);
  agent.Shutdown();  // aborts a run in progress; its end is reported as a failure
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return absl::OkStatus();
}

}  // namespace pipetrain::worker
