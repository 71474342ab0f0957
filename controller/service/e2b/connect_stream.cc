#include "e2b/connect_stream.h"

#include <ostream>

namespace pvs::service::e2b {
namespace {

void stream_head(Poco::Net::HTTPServerResponse& response) {
  response.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  response.setContentType("application/connect+json");
  response.setChunkedTransferEncoding(true);
  response.set("Cache-Control", "no-store");
}

}  // namespace

bool stream_events(Poco::Net::HTTPServerResponse& response, EventQueue& events,
                   std::chrono::steady_clock::time_point deadline,
                   std::chrono::milliseconds keepalive) {
  stream_head(response);
  std::ostream& out = response.send();
  out.flush();
  auto quiet_since = std::chrono::steady_clock::now();
  while (out.good()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      out << end_stream(ConnectError{ConnectCode::kDeadlineExceeded, "the call's timeout passed"});
      out.flush();
      return out.good();
    }
    auto wait = std::min<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
        std::chrono::milliseconds(500));
    if (auto m = events.next(wait)) {
      out << frame(0, *m);
      out.flush();
      quiet_since = std::chrono::steady_clock::now();
      continue;
    }
    if (events.finished()) {
      out << end_stream(events.error());
      out.flush();
      return out.good();
    }
    if (std::chrono::steady_clock::now() - quiet_since >= keepalive) {
      out << frame(0, keepalive_event());
      out.flush();
      quiet_since = std::chrono::steady_clock::now();
    }
  }
  return false;
}

void send_unary(Poco::Net::HTTPServerResponse& response, const std::string& json) {
  response.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  response.setContentType("application/json");
  response.setContentLength(static_cast<std::streamsize>(json.size()));
  response.send() << json;
}

void send_unary_error(Poco::Net::HTTPServerResponse& response, const ConnectError& error) {
  std::string body = unary_error_body(error);
  response.setStatusAndReason(
      static_cast<Poco::Net::HTTPResponse::HTTPStatus>(http_status(error.code)));
  response.setContentType("application/json");
  response.setContentLength(static_cast<std::streamsize>(body.size()));
  response.send() << body;
}

void send_stream_error(Poco::Net::HTTPServerResponse& response, const ConnectError& error) {
  stream_head(response);
  response.send() << end_stream(error);
}

}  // namespace pvs::service::e2b
