// The API's error: an HTTP status plus the envelope {"error":{"code":"...","message":"..."}}.
#pragma once

#include <string>

#include <tl/expected.hpp>

#include "pvesandbox/common/error.h"

namespace pvs::service {

struct ApiError {
  int status = 500;
  std::string code;     // stable, lower-case: "invalid_argument", "not_found", ...
  std::string message;  // for people; never contains secrets

  // {"error":{"code":"...","message":"..."}}
  std::string body() const;
};

template <typename T>
using ApiResult = tl::expected<T, ApiError>;

// 400 invalid_argument, 401 unauthenticated, 403 permission_denied, 404 not_found,
// 405 method_not_allowed, 409 conflict, 413 too_large, 415 unsupported_media_type, 422 (own codes),
// 429 limit_exceeded, 500 internal, 503 unavailable, 504 timeout.
ApiError bad_request(std::string message);
ApiError unauthenticated(std::string message = "missing or invalid bearer token");
ApiError not_found(std::string message);
ApiError method_not_allowed(std::string message);
ApiError too_large(std::string message);
// 422 with its own code: a well-formed request the target cannot take ("no_match", ...).
ApiError unprocessable(std::string code, std::string message);
ApiError unsupported_media_type(std::string message);
ApiError limit_exceeded(std::string message);
ApiError unavailable(std::string message);
ApiError internal_error(std::string message);
// 502 bad_gateway: a service the controller proxies to failed (nothing listening, a bad reply).
ApiError bad_gateway(std::string message);
// 504 timeout: that service did not answer in time.
ApiError gateway_timeout(std::string message);

// The HTTP mapping of the library's coarse codes.
ApiError from_error(const pvs::Error& error);
int http_status_for(pvs::ErrorCode code);

}  // namespace pvs::service
