// A real HTTP receiver for the approvals webhook in tests: Poco's HTTPServer on loopback that
// records each delivery and answers with a scripted status; and the receiver's own HMAC check.
#pragma once

#include <Poco/HMACEngine.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/SHA2Engine.h>
#include <Poco/StreamCopier.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pvs::test {

// Poco's SHA-256, shaped for Poco's HMACEngine: the receiver's own HMAC, not ours.
struct Sha256 : Poco::SHA2Engine {
  enum { BLOCK_SIZE = 64, DIGEST_SIZE = 32 };
  Sha256() : Poco::SHA2Engine(SHA_256) {}
};

inline std::string receiver_signature(const std::string& secret, const std::string& ts,
                                      const std::string& body) {
  Poco::HMACEngine<Sha256> hmac(secret);
  hmac.update(ts + "." + body);
  return "sha256=" + Poco::DigestEngine::digestToHex(hmac.digest());
}

struct Delivery {
  std::string event, id, timestamp, signature, content_type, body;
};

// Answers with the next status of `script` (200 once it runs out) and records each request.
class Receiver {
 public:
  explicit Receiver(std::deque<int> script) : script_(std::move(script)) {
    auto params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(2);
    server_ = std::make_unique<Poco::Net::HTTPServer>(
        new Factory(*this), Poco::Net::ServerSocket(Poco::Net::SocketAddress("127.0.0.1", 0)),
        params);
    server_->start();
  }
  ~Receiver() { server_->stopAll(true); }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + "/hook";
  }
  // Waits until `n` requests arrived (at most 10 s); what arrived.
  std::vector<Delivery> wait_for(std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return got_.size() >= n; });
    return got_;
  }

 private:
  struct Handler : Poco::Net::HTTPRequestHandler {
    explicit Handler(Receiver& r) : r_(r) {}
    void handleRequest(Poco::Net::HTTPServerRequest& req,
                       Poco::Net::HTTPServerResponse& resp) override {
      Delivery d{req.get("X-Pvs-Event", ""),     req.get("X-Pvs-Delivery", ""),
                 req.get("X-Pvs-Timestamp", ""), req.get("X-Pvs-Signature", ""),
                 req.getContentType(),           ""};
      Poco::StreamCopier::copyToString(req.stream(), d.body);
      int status = 200;
      {
        std::lock_guard lock(r_.mu_);
        if (!r_.script_.empty()) {
          status = r_.script_.front();
          r_.script_.pop_front();
        }
        r_.got_.push_back(d);
      }
      r_.cv_.notify_all();
      resp.setStatus(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status));
      resp.setContentLength(0);
      resp.send();
    }
    Receiver& r_;
  };
  struct Factory : Poco::Net::HTTPRequestHandlerFactory {
    explicit Factory(Receiver& r) : r_(r) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(
        const Poco::Net::HTTPServerRequest&) override {
      return new Handler(r_);
    }
    Receiver& r_;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> script_;
  std::vector<Delivery> got_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
};

}  // namespace pvs::test
