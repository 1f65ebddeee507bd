#include "common/malformed_request.h"

#include <glog/logging.h>
#include <google/protobuf/stubs/logging.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pipetrain {
namespace {

// The field of the last UTF-8 parse error on this thread; cleared when a call ends, so what a
// call finds here was logged while gRPC parsed that call's request (sync server threads do
// nothing between the end of one call and the parse of the next).
thread_local std::string last_invalid_utf8_field;

void ProtobufLogToGlog(google::protobuf::LogLevel level, const char* filename, int line,
                       const std::string& message) {
  std::string field = InvalidUtf8FieldFromLog(message);
  if (!field.empty()) {
    last_invalid_utf8_field = std::move(field);
    return;  // The interceptor reports it to the client; the server's log needn't.
  }
  const int severity = level == google::protobuf::LOGLEVEL_INFO      ? google::GLOG_INFO
                       : level == google::protobuf::LOGLEVEL_WARNING ? google::GLOG_WARNING
                                                                     : google::GLOG_ERROR;
  google::LogMessage(filename, line, severity).stream() << "protobuf: " << message;
}

class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (methods->GetRecvMessage() == nullptr) {
        request_unparsable_ = true;
        field_ = std::move(last_invalid_utf8_field);
      }
      last_invalid_utf8_field.clear();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      last_invalid_utf8_field.clear();
      const grpc::Status status = methods->GetSendStatus();
      if (request_unparsable_ && status.error_code() == grpc::StatusCode::INTERNAL) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            field_.empty() ? std::string("the request is not a valid protobuf message of its type")
                           : absl::StrCat(field_, ": not valid UTF-8 (string fields must be "
                                                  "UTF-8 text)")));
      }
    }
    methods->Proceed();
  }

 private:
  bool request_unparsable_ = false;
  std::string field_;
};

class MalformedRequestInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo*) override {
    return new MalformedRequestInterceptor();
  }
};

}  // namespace

std::string InvalidUtf8FieldFromLog(absl::string_view message) {
  constexpr absl::string_view kPrefix = "String field '";
  constexpr absl::string_view kSuffix = "' contains invalid UTF-8 data when parsing";
  if (!absl::ConsumePrefix(&message, kPrefix)) return "";
  const size_t end = message.find(kSuffix);
  if (end == absl::string_view::npos) return "";
  return std::string(message.substr(0, end));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory() {
  static std::once_flag installed;
  std::call_once(installed, [] { google::protobuf::SetLogHandler(&ProtobufLogToGlog); });
  return std::make_unique<MalformedRequestInterceptorFactory>();
}

}  // namespace pipetrain
