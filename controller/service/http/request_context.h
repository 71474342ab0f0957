// One request as the handlers see it, from the pipeline (app/api.cc) to the reply, and
// the refusal a policy gate throws (policy/gate.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "http/api_error.h"
#include "http/auth.h"
#include "http/router.h"

namespace pvs::service {

// A call the policy refused: the error for the caller and the decision for the audit log.
struct PolicyRefusal {
  ApiError error;
  std::string policy_json;
};

// One request as the handlers see it.
struct RequestContext {
  Poco::Net::HTTPServerRequest* request = nullptr;
  Poco::Net::HTTPServerResponse* response = nullptr;
  std::string method, path, route;
  PathParams params;
  std::multimap<std::string, std::string> query;
  std::optional<Principal> principal;
  std::string request_id;
  std::chrono::steady_clock::time_point start;
  bool responded = false;
  int status = 0;
  // For the audit log of mutating calls.
  std::string action;
  std::string sandbox;
  // The sandbox of an E2B envd request routed by its Host name (49983-<id>.<e2b.domain>).
  std::string e2b_sandbox;
  std::string params_json = "{}";
  std::string policy_json;  // the policy's decision, for the audit log
  std::optional<ApiError> error;
  // The request body: read whole (or streamed) by the handler, or still on the socket.
  bool body_read = false;
  bool drain = false;  // refused before its body was read: drained after the reply (bounded)

  std::string query_value(const std::string& key) const;
};

// For the handlers (app/api.cc).
double seconds_since(std::chrono::steady_clock::time_point t);
std::string iso_time(std::int64_t unix_seconds);  // "2026-11-22T15:04:05Z"

}  // namespace pvs::service
