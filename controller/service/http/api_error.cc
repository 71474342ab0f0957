#include "http/api_error.h"

#include "http/json.h"

namespace pvs::service {

std::string ApiError::body() const {
  JsonWriter w;
  w.begin_object().key("error").begin_object();
  w.key("code").value(code).key("message").value(message);
  w.end_object().end_object();
  return w.take() + "\n";
}

ApiError bad_request(std::string m) {
  return {400, "invalid_argument", std::move(m)};
}
ApiError unauthenticated(std::string m) {
  return {401, "unauthenticated", std::move(m)};
}
ApiError not_found(std::string m) {
  return {404, "not_found", std::move(m)};
}
ApiError method_not_allowed(std::string m) {
  return {405, "method_not_allowed", std::move(m)};
}
ApiError too_large(std::string m) {
  return {413, "too_large", std::move(m)};
}
ApiError unprocessable(std::string code, std::string m) {
  return {422, std::move(code), std::move(m)};
}
ApiError unsupported_media_type(std::string m) {
  return {415, "unsupported_media_type", std::move(m)};
}
ApiError limit_exceeded(std::string m) {
  return {429, "limit_exceeded", std::move(m)};
}
ApiError unavailable(std::string m) {
  return {503, "unavailable", std::move(m)};
}
ApiError internal_error(std::string m) {
  return {500, "internal", std::move(m)};
}
ApiError bad_gateway(std::string m) {
  return {502, "bad_gateway", std::move(m)};
}
ApiError gateway_timeout(std::string m) {
  return {504, "timeout", std::move(m)};
}

int http_status_for(pvs::ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kUnauthenticated: return 401;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kAlreadyExists: return 409;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kLimitExceeded: return 429;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kTimeout: return 504;
    case ErrorCode::kIo: return 500;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

ApiError from_error(const pvs::Error& error) {
  // A full disk in the sandbox is its state, not the request's size.
  if (error.is(SshErrc::kDiskFull)) return {507, "insufficient_storage", error.message};
  std::string code(pvs::to_string(error.code));
  if (error.code == ErrorCode::kIo) code = "internal";
  return {http_status_for(error.code), code, error.message};
}

}  // namespace pvs::service
