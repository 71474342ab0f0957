// A plain HTTPS client for pvesim's tests (no ProxmoxClient): status, reason, body, JSON.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/StreamCopier.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

namespace pvesim::testing {

struct Answer {
  int status = 0;
  std::string reason, body;

  // The "data" member of the body (an empty Var if none).
  Poco::Dynamic::Var data() const {
    try {
      Poco::JSON::Parser parser;
      auto o = parser.parse(body).extract<Poco::JSON::Object::Ptr>();
      return o->get("data");
    } catch (const std::exception&) {
      return {};
    }
  }
  Poco::JSON::Array::Ptr array() const {
    auto d = data();
    return d.isEmpty() ? nullptr : d.extract<Poco::JSON::Array::Ptr>();
  }
  Poco::JSON::Object::Ptr object() const {
    auto d = data();
    return d.isEmpty() ? nullptr : d.extract<Poco::JSON::Object::Ptr>();
  }
};

class Https {
 public:
  Https(int port, std::string auth)
      : port_(port),
        auth_(std::move(auth)),
        context_(new Poco::Net::Context(Poco::Net::Context::TLS_CLIENT_USE, "", "", "",
                                        Poco::Net::Context::VERIFY_NONE)) {}

  // `path` below /api2/json, or a /_pvesim/ control path (sent without auth, as JSON).
  Answer operator()(const std::string& method, const std::string& path,
                    const std::string& body = "") const {
    bool control = path.rfind("/_pvesim/", 0) == 0;
    Poco::Net::HTTPSClientSession session("127.0.0.1", static_cast<Poco::UInt16>(port_), context_);
    Poco::Net::HTTPRequest req(method, control ? path : "/api2/json" + path,
                               Poco::Net::HTTPMessage::HTTP_1_1);
    if (!control) req.set("Authorization", auth_);
    if (!body.empty()) {
      req.setContentType(control ? "application/json" : "application/x-www-form-urlencoded");
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    session.sendRequest(req) << body;
    Poco::Net::HTTPResponse resp;
    std::istream& in = session.receiveResponse(resp);
    Answer a;
    std::ostringstream head;  // not getStatus(): 595 is no HTTPStatus enumerator
    resp.write(head);
    a.status = std::stoi(head.str().substr(head.str().find(' ') + 1, 3));
    a.reason = resp.getReason();
    std::ostringstream os;
    Poco::StreamCopier::copyStream(in, os);
    a.body = os.str();
    return a;
  }

  // Polls a task until it stops; returns its exitstatus ("" if it did not end in time).
  std::string wait_task(const std::string& node, const std::string& upid,
                        int timeout_ms = 10000) const {
    for (int waited = 0; waited < timeout_ms; waited += 20) {
      auto o = (*this)("GET", "/nodes/" + node + "/tasks/" + upid + "/status").object();
      if (o && o->getValue<std::string>("status") == "stopped")
        return o->getValue<std::string>("exitstatus");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  }

 private:
  int port_;
  std::string auth_;
  Poco::Net::Context::Ptr context_;
};

}  // namespace pvesim::testing
