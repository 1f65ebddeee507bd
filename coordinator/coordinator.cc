#include "coordinator/coordinator.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/grpc_server_metrics.h"
#include "common/malformed_request.h"
#include "common/status_macros.h"
#include "coordinator/grpc_worker_client.h"
#include "coordinator/job_service.h"
#include "coordinator/sqlite_job_store.h"
#include "coordinator/worker_registry_service.h"
#include "glog/logging.h"

namespace pipetrain::coordinator {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string WithPort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  return absl::StrCat(colon == std::string::npos ? listen : listen.substr(0, colon), ":", port);
}

constexpr const char* kServices[] = {"", "pipetrain.v1.JobService", "pipetrain.v1.WorkerRegistry"};

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorConfig& config) {
  if (!IsHostPort(config.listen) &&
      !(config.listen.size() > 2 && config.listen.substr(config.listen.size() - 2) == ":0")) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen: \"", config.listen, "\" is not host:port"));
  }
  std::unique_ptr<Coordinator> c(new Coordinator());

  // TLS material first: a bad file must not leave a half-started daemon.
  std::shared_ptr<grpc::ServerCredentials> server_creds = grpc::InsecureServerCredentials();
  WorkerClientTls worker_tls;
  if (!config.tls_cert_file.empty() || !config.tls_key_file.empty()) {
    if (config.tls_cert_file.empty() || config.tls_key_file.empty()) {
      return absl::InvalidArgumentError("tls-cert / tls-key: give both or neither");
    }
    PT_ASSIGN_OR_RETURN(std::string cert, ReadPem(config.tls_cert_file, "tls-cert"));
    PT_ASSIGN_OR_RETURN(std::string key, ReadPem(config.tls_key_file, "tls-key"));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    // Workers are called over TLS with this certificate as the client certificate: a worker
    // with --tls-ca requires one (mutual TLS) whether or not this server requires them.
    worker_tls.enabled = true;
    worker_tls.cert_chain_pem = cert;
    worker_tls.private_key_pem = key;
    if (!config.tls_client_ca_file.empty()) {
      PT_ASSIGN_OR_RETURN(std::string ca, ReadPem(config.tls_client_ca_file, "tls-client-ca"));
      ssl.pem_root_certs = ca;
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      worker_tls.root_certs_pem = ca;
    }
    server_creds = grpc::SslServerCredentials(ssl);
  } else if (!config.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError("tls-client-ca: needs tls-cert and tls-key");
  }

  JobStore* store = config.store;
  if (store == nullptr) {
    PT_ASSIGN_OR_RETURN(c->owned_store_, SqliteJobStore::Open(config.db_path));
    store = c->owned_store_.get();
  }
  JobSeriesOptions job_series;
  job_series.retention = config.job_metrics_retention;
  c->metrics_ = std::make_unique<CoordinatorMetrics>(job_series);
  RegisterBuildInfo(c->metrics_->registry(), "pipetrain-coordinator");
  c->grpc_metrics_ = std::make_unique<GrpcServerMetrics>(c->metrics_->registry());
  WorkerRegistryOptions registry_options;
  registry_options.heartbeat_timeout = config.heartbeat_timeout;
  registry_options.issue_credentials = !config.cluster_secret.empty();
  c->registry_ = std::make_unique<WorkerRegistry>(registry_options, c->metrics_.get());
  WorkerClient* worker_client = config.worker_client;
  if (worker_client == nullptr) {
    // Each Worker call carries the coordinator token that worker got at its registration.
    WorkerRegistry* registry = c->registry_.get();
    c->owned_worker_client_ = std::make_unique<GrpcWorkerClient>(
        worker_tls, [registry](const std::string& address) {
          return registry->CoordinatorTokenFor(address);
        });
    worker_client = c->owned_worker_client_.get();
  }
  c->jobs_ = std::make_unique<JobManager>(store, c->registry_.get(), worker_client,
                                          c->metrics_.get(), config.jobs);
  PT_RETURN_IF_ERROR(c->jobs_->Start());

  c->job_service_ =
      std::make_unique<JobServiceImpl>(c->jobs_.get(), c->registry_.get(), c->metrics_.get(),
                                       config.auth_token);
  c->registry_service_ = std::make_unique<WorkerRegistryServiceImpl>(
      c->registry_.get(), c->jobs_.get(), c->metrics_.get(), config.cluster_secret);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, server_creds, &port);
  builder.SetMaxReceiveMessageSize(config.max_receive_message_bytes);
  builder.RegisterService(c->job_service_.get());
  builder.RegisterService(c->registry_service_.get());
  // In this order: the metrics count the status the malformed-request rewrite sends.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(NewMalformedRequestInterceptorFactory());
  interceptors.push_back(c->grpc_metrics_->MakeInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  c->server_ = builder.BuildAndStart();
  if (c->server_ == nullptr || port == 0) {
    c->jobs_->Shutdown();
    return absl::UnavailableError(absl::StrCat("listen: cannot serve on ", config.listen));
  }
  c->address_ = WithPort(config.listen, port);
  for (const char* service : kServices) {
    c->server_->GetHealthCheckService()->SetServingStatus(service, true);
  }

  if (!config.metrics_listen.empty()) {
    try {
      c->exposer_ = std::make_unique<prometheus::Exposer>(config.metrics_listen);
    } catch (const std::exception& e) {
      c->Shutdown();
      return absl::UnavailableError(
          absl::StrCat("metrics-listen: cannot serve on ", config.metrics_listen, ": ", e.what()));
    }
    c->exposer_->RegisterCollectable(c->metrics_->collectable());
    const std::vector<int> ports = c->exposer_->GetListeningPorts();
    c->metrics_address_ = WithPort(config.metrics_listen, ports.empty() ? 0 : ports.front());
  }
  LOG(INFO) << "coordinator: serving on " << c->address_
            << (c->metrics_address_.empty() ? "" : ", metrics on " + c->metrics_address_);
  return c;
}

Coordinator::~Coordinator() { Shutdown(); }

void Coordinator::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    for (const char* service : kServices) {
      server_->GetHealthCheckService()->SetServingStatus(service, false);
    }
  }
  if (job_service_ != nullptr) job_service_->StopStreams();
  if (jobs_ != nullptr) jobs_->Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  exposer_.reset();
}

}  // namespace pipetrain::coordinator
