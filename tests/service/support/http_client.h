// A tiny HTTP/1.1 client for the service tests (Poco::Net::HTTPClientSession, one per call).
#pragma once

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>

#include <map>
#include <string>

namespace pvs::test {

struct HttpReply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
};

inline HttpReply http(std::uint16_t port, const std::string& method, const std::string& uri,
                      const std::string& body = "", const std::string& token = "",
                      std::map<std::string, std::string> headers = {}) {
  Poco::Net::HTTPClientSession session("127.0.0.1", port);
  session.setTimeout(Poco::Timespan(120, 0));
  Poco::Net::HTTPRequest req(method, uri, Poco::Net::HTTPMessage::HTTP_1_1);
  if (!token.empty()) req.set("Authorization", "Bearer " + token);
  bool has_type = headers.count("Content-Type") > 0;
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST" || method == "PUT") {
    if (!has_type) req.setContentType("application/json");
    req.setContentLength(static_cast<std::streamsize>(body.size()));
  }
  std::ostream& out = session.sendRequest(req);
  out << body;
  Poco::Net::HTTPResponse resp;
  std::istream& in = session.receiveResponse(resp);
  HttpReply r;
  r.status = resp.getStatus();
  Poco::StreamCopier::copyToString(in, r.body);
  for (const auto& [k, v] : resp) r.headers[k] = v;
  return r;
}

}  // namespace pvs::test
