#include "pvesandbox/common/error.h"

#include <cstring>

namespace pvs {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kUnauthenticated: return "unauthenticated";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kTooLarge: return "too_large";
    case ErrorCode::kLimitExceeded: return "limit_exceeded";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Error::to_string() const {
  std::string out(pvs::to_string(code));
  out += ": ";
  out += message;
  return out;
}

Error errno_error(std::string_view what, int err) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Error{ErrorCode::kIo, std::move(message)};
}

}  // namespace pvs
