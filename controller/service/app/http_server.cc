// HttpServer (app/api.h): Poco's HTTPServer on the listen address, plain or TLS, with the
// configured threads, queue and keep-alive; every request goes to Api::handle.
//
// Keep-alive while there is room: Poco serves a connection on one worker thread until it
// closes, so idle keep-alive connections can hold every worker while new connections wait in
// the queue for a keep-alive timeout (a burst of E2B clients, each holding a few connections,
// stalled for seconds that way). A reply is sent with `Connection: close` when it is served on
// the last free worker or a connection is waiting for one: the worker is free for the next
// connection as soon as the reply is out. Upgrades (WebSocket) are left alone.
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/SecureServerSocket.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/ThreadPool.h>

#include <atomic>

#include "app/api.h"

namespace pvs::service {

// How busy the server is, once it runs (start() publishes it; stop() withdraws it first).
struct ServerLoad {
  std::atomic<const Poco::Net::TCPServer*> server{nullptr};
  int threads = 0;
  // Serving on the last free worker, or a connection waits for one.
  bool crowded() const {
    const auto* s = server.load(std::memory_order_acquire);
    return s != nullptr && (s->currentConnections() >= threads || s->queuedConnections() > 0);
  }
};

namespace {

class ApiHandler : public Poco::Net::HTTPRequestHandler {
 public:
  ApiHandler(Api& api, const ServerLoad& load) : api_(api), load_(load) {}
  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    if (response.getKeepAlive() && !request.has("Upgrade") && load_.crowded()) {
      response.setKeepAlive(false);
    }
    api_.handle(request, response);
  }

 private:
  Api& api_;
  const ServerLoad& load_;
};

class ApiFactory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  ApiFactory(Api& api, const ServerLoad& load) : api_(api), load_(load) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new ApiHandler(api_, load_);
  }

 private:
  Api& api_;
  const ServerLoad& load_;
};

}  // namespace

HttpServer::HttpServer(const ServiceConfig& config, Api& api)
    : config_(config), api_(api), load_(std::make_unique<ServerLoad>()) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::start() {
  try {
    Poco::Net::SocketAddress address(config_.listen_address, config_.listen_port);
    Poco::Net::ServerSocket socket;
    if (config_.tls_cert_file.empty()) {
      socket = Poco::Net::ServerSocket(address, config_.http_max_queued);
    } else {
      Poco::Net::Context::Ptr context =
          new Poco::Net::Context(Poco::Net::Context::TLS_SERVER_USE, config_.tls_key_file,
                                 config_.tls_cert_file, "", Poco::Net::Context::VERIFY_NONE, 9,
                                 false, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!MD5:!DSS");
      context->disableProtocols(Poco::Net::Context::PROTO_SSLV2 | Poco::Net::Context::PROTO_SSLV3 |
                                Poco::Net::Context::PROTO_TLSV1 |
                                Poco::Net::Context::PROTO_TLSV1_1);
      socket = Poco::Net::SecureServerSocket(address, config_.http_max_queued, context);
    }
    port_ = socket.address().port();
    auto* params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(config_.http_threads);
    params->setMaxQueued(config_.http_max_queued);
    params->setKeepAlive(true);
    params->setKeepAliveTimeout(Poco::Timespan(config_.http_keepalive_timeout_seconds, 0));
    params->setMaxKeepAliveRequests(config_.http_max_keepalive_requests);
    params->setTimeout(Poco::Timespan(config_.http_request_timeout_seconds, 0));
    params->setServerName("pve-sandbox-controller");
    pool_ = std::make_unique<Poco::ThreadPool>(2, config_.http_threads + 2);
    load_->threads = config_.http_threads;
    server_ = std::make_unique<Poco::Net::HTTPServer>(new ApiFactory(api_, *load_), *pool_, socket,
                                                      params);
    load_->server.store(server_.get(), std::memory_order_release);
    server_->start();
  } catch (const Poco::Exception& e) {
    return fail(ErrorCode::kUnavailable, "cannot listen on " + config_.listen_address + ":" +
                                             std::to_string(config_.listen_port) + ": " +
                                             e.displayText());
  }
  return {};
}

void HttpServer::stop() {
  load_->server.store(nullptr, std::memory_order_release);
  if (server_) {
    server_->stopAll(true);
    server_.reset();
  }
  api_.stop_websockets();  // they run off the pool, on threads of their own
  if (pool_) {
    pool_->joinAll();
    pool_.reset();
  }
}

}  // namespace pvs::service
