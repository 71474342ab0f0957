// The composition root (app/, above every room): the Api owns the shared services and builds
// each room's handler class, and runs the path every request takes on Poco's HTTPServer:
// routing, authentication, per-token limits, replies, metrics and the audit of mutating calls.
// The route table (routes.cc) is the API at a glance; each row points at a method of one
// handler class. The rooms below: api/sandboxes, api/files, api/ports, api/terminals,
// api/fleet, api/audit, api/console, api/mcp, e2b/; the policy gate and the approval routes
// are policy/; the pipeline's primitives http/; config, observability and pure helpers core/.
//
//   pvs::service::Api api(config, &audit, &metrics);
//   api.set_manager(manager);          // until then sandbox calls answer 503 "starting"
//   pvs::service::HttpServer server(config, api);
//   server.start();                    // binds; server.port() is the bound port
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/ThreadPool.h>

#include "api/audit/audit_routes.h"
#include "api/console/console_routes.h"
#include "api/files/file_routes.h"
#include "api/fleet/fleet_routes.h"
#include "api/fleet/system_routes.h"
#include "api/mcp/mcp_routes.h"
#include "api/ports/port_routes.h"
#include "api/sandboxes/sandbox_ops.h"
#include "api/sandboxes/sandbox_routes.h"
#include "api/templates/template_routes.h"
#include "api/terminals/terminal_routes.h"
#include "api/terminals/terminals.h"
#include "api/volumes/volume_routes.h"
#include "core/config/config.h"
#include "core/observability/audit.h"
#include "core/observability/denied_log.h"
#include "core/observability/metrics.h"
#include "e2b/e2b_routes.h"
#include "http/api_error.h"
#include "http/auth.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/requests.h"
#include "http/router.h"
#include "http/token_limits.h"
#include "policy/approval_routes.h"
#include "policy/approvals.h"
#include "policy/gate.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

class Api;

// One row of the route table: who may call it and what the audit log calls it.
struct Route {
  enum class Access { kPublic, kToken, kAdmin };  // kAdmin: a token with admin: true
  std::string_view method;
  std::string_view pattern;                // also the metrics' route label
  void (*handler)(Api&, RequestContext&);  // on<&Class::method> (routes.cc)
  Access access;
  std::string_view action;  // audit action of a mutating call; empty: not audited
};

// The composition root and request pipeline: owns the shared services (the Manager's holder,
// the token store and limits, the policy gate, the terminal registry) and builds the handler
// classes the route table points at, each given only what it uses. It is the Replies of every
// handler (the audit of a mutating call, metrics, body settling) and their SandboxOps.
class Api : public Replies, public SandboxOps {
 public:
  Api(ServiceConfig config, AuditLog* audit, Metrics* metrics);
  ~Api();

  // The Manager, once Manager::open succeeded; null: sandbox calls get 503.
  void set_manager(std::shared_ptr<Manager> manager);
  std::shared_ptr<Manager> manager() const;

  void handle(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response);

  const ServiceConfig& config() const { return config_; }

  static void declare_metrics(Metrics& metrics);  // app/api_metrics.cc
  // The route table (routes.cc).
  static std::span<const Route> routes();
  // The handler object a route row points at (routes.cc).
  template <class Part>
  Part& part();

  // The policy's say on a call (policy/gate.h): REST handlers, terminal input, MCP tools.
  PolicyGate& gate() { return gate_; }
  TokenLimits& limits() { return limits_; }

  // SandboxOps (app/sandbox_access.cc): the sandboxes a caller may use.
  std::shared_ptr<Sandbox> sandbox_for(const Principal& principal, const std::string& id) override;
  std::shared_ptr<Sandbox> create_for(const Principal& principal, const CreateRequest& request,
                                      const Egress& egress) override;
  std::vector<SandboxInfo> list_for(const Principal& principal, const Labels& selector) override;
  CustomTemplate capture_for(const Principal& principal, Sandbox& source,
                             const std::string& name) override;
  std::vector<std::shared_ptr<Sandbox>> fork_for(const Principal& principal, Sandbox& source,
                                                 int count, CreateRequest request,
                                                 const Egress& egress) override;
  std::vector<CustomTemplate> templates_for(const Principal& principal) override;
  void delete_template_for(const Principal& principal, const std::string& name) override;

  // Replies (http/replies.h): how every handler answers.
  void send_json(RequestContext& ctx, int status, const std::string& body) override;
  void send_bytes(RequestContext& ctx, int status, const std::string& content_type,
                  std::string_view body) override;
  void send_error(RequestContext& ctx, const ApiError& error) override;
  void send_empty(RequestContext& ctx, int status) override;
  void begin_reply(RequestContext& ctx, int status, const std::string& content_type) override;
  void abort_reply(RequestContext& ctx) override;
  std::string read_body(RequestContext& ctx, std::uint64_t limit) override;
  std::string json_body(RequestContext& ctx) override;
  // The audit record of a mutating call (ctx.action), before its reply leaves.
  void audit(RequestContext& ctx, int status, const ApiError* error) override;

  // Appends a record to the audit log (a failure is counted and logged, never thrown).
  void append_audit(const AuditRecord& record);
  // Hangs up every terminal WebSocket and upgraded port connection, and joins their threads
  // (HttpServer::stop).
  void stop_websockets() {
    terminal_routes_.stop_websockets();
    port_routes_.stop_upgrades();
  }

 private:
  void collect(Metrics& metrics);  // the Manager's state into /metrics, at each scrape
  void dispatch(RequestContext& ctx);
  bool dispatch_e2b_port(RequestContext& ctx);  // E2B's routing to a sandbox's port
  void authenticate(RequestContext& ctx);       // throws ApiError 401 / 429
  std::shared_ptr<Manager> require_manager();
  void finish(RequestContext& ctx);
  void audit_denied(RequestContext& ctx, const DeniedLog::Line& line, std::string_view reason);
  void drain_body(RequestContext& ctx);
  std::function<void(const AuditRecord&)> audit_sink() {
    return [this](const AuditRecord& r) { append_audit(r); };
  }

  ServiceConfig config_;
  TokenStore tokens_;
  AuditLog* audit_;
  Metrics* metrics_;
  Router<const Route*> router_;
  TokenLimits limits_;
  DeniedLog denied_;
  mutable std::mutex mu_;
  std::shared_ptr<Manager> manager_;
  std::map<std::string, int> creating_;  // token -> creates in flight (per-token limit)
  std::atomic<std::uint64_t> next_request_{1};
  std::string request_prefix_;
  // Terminals, closed with their sandbox (SandboxRoutes::destroy) or when idle.
  std::unique_ptr<TerminalRegistry> terminals_ = std::make_unique<TerminalRegistry>(
      TerminalRegistry::Limits{config_.terminal_max_per_sandbox, config_.terminal_max_per_token,
                               std::chrono::seconds(config_.terminal_idle_timeout_seconds)});
  PolicyGate gate_{config_, metrics_, *this};
  // The handler classes the route table names, each given only what it uses.
  SystemRoutes system_routes_{[this] { return manager(); }, tokens_, metrics_, *this};
  SandboxRoutes sandbox_routes_{
      {config_, *this, gate_, limits_, metrics_, *this, [this](const std::string& id) {
         terminals_->close_sandbox(id);
         e2b_routes_.forget(id);
       }}};
  FileRoutes file_routes_{config_, *this, gate_, *this};
  PortRoutes port_routes_{
      {*this, *this, gate_, metrics_, audit_sink(),
       WsSessions::Limits{config_.ports_max_upgrades_per_token, config_.ports_max_upgrades},
       tokens_, limits_, config_.ports_preview_max_seconds, config_.ports_preview_secret,
       config_.ports_route}};
  TerminalRoutes terminal_routes_{{config_, *this, gate_, *terminals_, *this, audit_sink()}};
  McpRoutes mcp_routes_{{config_, limits_, *this, audit_sink(),
                         mcp::ToolOps{config_, gate_, *this, sandbox_routes_, file_routes_,
                                      terminal_routes_, port_routes_, audit_sink()}}};
  ApprovalRoutes approval_routes_{gate_, *this};
  AuditRoutes audit_routes_{audit_ ? config_.audit_file : std::string(), *this};
  ConsoleRoutes console_routes_{*this};
  FleetRoutes fleet_routes_{[this] { return require_manager(); }, *this};
  TemplateRoutes template_routes_{[this] { return require_manager(); }, *this};
  VolumeRoutes volume_routes_{[this] { return require_manager(); }, *this};
  E2bRoutes::Deps e2b_deps();         // app/e2b_deps.cc
  E2bRoutes e2b_routes_{e2b_deps()};  // the E2B-compatible API (docs/e2b.md)
};

struct ServerLoad;  // app/http_server.cc

// Poco's HTTPServer for an Api (app/http_server.cc): the listen address, plain or TLS, the
// configured threads, queue and keep-alive (kept only while a worker is free).
class HttpServer {
 public:
  HttpServer(const ServiceConfig& config, Api& api);
  ~HttpServer();  // stop()
  // Binds and starts serving. Errors: the address cannot be bound, TLS files unusable.
  Status start();
  void stop();
  std::uint16_t port() const { return port_; }

 private:
  const ServiceConfig& config_;
  Api& api_;
  std::unique_ptr<Poco::ThreadPool> pool_;
  std::unique_ptr<ServerLoad> load_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  std::uint16_t port_ = 0;
};

}  // namespace pvs::service
