// gRPC helpers for coordinator tests: stubs on a loopback channel and a grpc.health.v1 Check
// through the generic stub (Debian ships no generated health client).
// Thread-safety: functions are thread-safe.
#ifndef PIPETRAIN_TESTS_COORDINATOR_GRPC_TEST_UTIL_H_
#define PIPETRAIN_TESTS_COORDINATOR_GRPC_TEST_UTIL_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <memory>
#include <string>

namespace pipetrain::testing {

inline std::shared_ptr<grpc::Channel> Loopback(const std::string& address,
                                               int max_send_bytes = 64 << 20) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(max_send_bytes);
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// The grpc.health.v1 ServingStatus of `service` (1 = SERVING, 2 = NOT_SERVING), or -1 on error.
inline int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                        const std::string& service = "") {
  grpc::GenericStub stub(channel);
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes.push_back(0x0a);
    request_bytes.push_back(static_cast<char>(service.size()));
    request_bytes += service;
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes.size() >= 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

}  // namespace pipetrain::testing

#endif  // PIPETRAIN_TESTS_COORDINATOR_GRPC_TEST_UTIL_H_
