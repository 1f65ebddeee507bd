// A server interceptor that turns gRPC's answer to a request protobuf cannot parse (INTERNAL with
// an empty message, e.g. a string field holding invalid UTF-8) into INVALID_ARGUMENT naming the
// field when protobuf says which, so a client learns what to fix and an operator's alerts on
// INTERNAL stay about pipetrain's own faults.
//
// gRPC parses a request before any handler runs and answers a failed parse itself; protobuf
// reports the offending string field only through its log. So the first call of
// NewMalformedRequestInterceptorFactory installs a protobuf log handler that remembers, per
// thread, the last field named by a UTF-8 error (and sends every protobuf message on to glog as
// before), and the interceptor reads it on the thread that parsed the request.
//
// Thread-safety: the factory and its interceptors may be used from any gRPC thread.
#ifndef PIPETRAIN_COMMON_MALFORMED_REQUEST_H_
#define PIPETRAIN_COMMON_MALFORMED_REQUEST_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace pipetrain {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory();

// The field a protobuf log line about a parse that met invalid UTF-8 names
// ("pipetrain.v1.JobSpec.name"), or "" for any other line
// (including the same complaint while serializing). Exposed for tests.
std::string InvalidUtf8FieldFromLog(absl::string_view log_message);

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_MALFORMED_REQUEST_H_
