// What the benches that drive the REST API share: one keep-alive connection to it (as an agent
// keeps one), and the config of a REST service in the bench's own process (InProcessService)
// with one bench token.
//
//   auto config = pvs::bench::rest_config(stack.dir(), 1000, true);
//   pvs::bench::RestConn c(port);
//   std::string sandbox = c.must("POST", "/v1/sandboxes", "{}", 201);
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>

#include "core/config/config.h"
#include "http/auth.h"

namespace pvs::bench {

inline constexpr const char* kBenchToken = "tok-bench";

// Loopback, any free port, the token "bench" (`kBenchToken`), the audit log in `dir`.
inline service::ServiceConfig rest_config(const std::string& dir, int max_sandboxes, bool admin) {
  service::ServiceConfig config;
  config.listen_port = 0;
  config.tokens = {{"bench", service::sha256_hex(kBenchToken), max_sandboxes, admin}};
  config.audit_file = dir + "/audit.log";
  return config;
}

class RestConn {
 public:
  explicit RestConn(std::uint16_t port, int timeout_seconds = 600) : s_("127.0.0.1", port) {
    s_.setKeepAlive(true);
    s_.setTimeout(Poco::Timespan(timeout_seconds, 0));
  }
  // The status; the body in *out (null: dropped) and, if asked, the response header `want`.
  int call(const std::string& method, const std::string& uri, const std::string& body,
           std::string* out, const std::string& type = "application/json",
           const std::map<std::string, std::string>& headers = {}, const char* want = nullptr,
           std::string* got = nullptr) {
    Poco::Net::HTTPRequest req(method, uri, Poco::Net::HTTPMessage::HTTP_1_1);
    req.set("Authorization", std::string("Bearer ") + kBenchToken);
    for (const auto& [k, v] : headers) req.set(k, v);
    req.setKeepAlive(true);
    if (!body.empty()) {
      req.setContentType(type);
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    s_.sendRequest(req) << body;
    Poco::Net::HTTPResponse resp;
    std::string sink;
    if (out) out->clear();
    Poco::StreamCopier::copyToString(s_.receiveResponse(resp), out ? *out : sink);
    if (want && got) *got = resp.get(want, "");
    return resp.getStatus();
  }
  int post(const std::string& uri, const std::string& body, std::string* out,
           const std::map<std::string, std::string>& headers = {}, const char* want = nullptr,
           std::string* got = nullptr) {
    return call("POST", uri, body, out, "application/json", headers, want, got);
  }
  // The body of a call that must answer `status`; else throws with what it answered.
  std::string must(const std::string& method, const std::string& uri, const std::string& body,
                   int status) {
    std::string out;
    int got = call(method, uri, body, &out);
    if (got != status)
      throw std::runtime_error(method + " " + uri + ": " + std::to_string(got) + " " + out);
    return out;
  }

 private:
  Poco::Net::HTTPClientSession s_;
};

}  // namespace pvs::bench
