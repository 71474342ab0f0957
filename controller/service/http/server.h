// The request pipeline (room http/): Poco's HTTPServer, routing, authentication, per-token
// limits, replies, metrics and the audit of mutating calls. The route table (routes.cc) is the
// API at a glance; each row points at a method of one handler class. The resource rooms are
// beside this one: api/sandboxes, api/files, api/terminals, api/fleet, api/audit, api/console,
// api/mcp; the policy gate and the approval routes are policy/; config and observability
// (metrics, audit log) are core/.
//
//   pvs::service::Api api(config, &audit, &metrics);
//   api.set_manager(manager);          // until then sandbox calls answer 503 "starting"
//   pvs::service::HttpServer server(config, api);
//   server.start();                    // binds; server.port() is the bound port
#pragma once

#include <atomic>
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
#include "api/fleet/fleet_routes.h"
#include "api/terminals/terminal_requests.h"
#include "api/terminals/terminals.h"
#include "api/terminals/ws_sessions.h"
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
struct WsConnection;  // api/terminals/routes_terminal_ws.cc
struct ServiceConfig;
namespace mcp {
class SessionStore;
struct Session;
struct ModernServer;
struct Message;
}  // namespace mcp

// What files/edit did: the reply of the REST call and of the MCP tool edit_file.
struct EditReply {
  std::string path;
  std::size_t replaced = 0;
  std::uint64_t size = 0;  // of the file now
  bool crlf = false;       // matched with CRLF line ends
  std::string diff;        // unified, a few lines of context, cut at 4 KiB
};
std::string edit_reply_json(const EditReply& reply);

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
// the policy gate, terminals, MCP sessions) and the handler classes the route table points at.
class Api : public Replies {
 public:
  Api(ServiceConfig config, AuditLog* audit, Metrics* metrics);
  ~Api();

  // The Manager, once Manager::open succeeded; null: sandbox calls get 503.
  void set_manager(std::shared_ptr<Manager> manager);
  std::shared_ptr<Manager> manager() const;

  void handle(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response);

  const ServiceConfig& config() const { return config_; }

  static void declare_metrics(Metrics& metrics);  // service_metrics.cc
  // The route table (routes.cc).
  static std::span<const Route> routes();

  // ---- What the REST handlers and the MCP tools share (each throws ApiError) ----------------
  // A sandbox `principal` may use: its own, or any for an admin; others' are "no sandbox".
  std::shared_ptr<Sandbox> sandbox_for(const Principal& principal, const std::string& id);
  // A new sandbox owned by `principal`, within its max_sandboxes (429 beyond).
  std::shared_ptr<Sandbox> create_for(const Principal& principal, const CreateRequest& request,
                                      const Egress& egress);
  using WaitProgress = PolicyGate::WaitProgress;
  using Admission = PolicyGate::Admission;
  // The policy's say on a call (policy/gate.h): REST handlers, terminal input, MCP tools.
  PolicyGate& gate() { return gate_; }
  // The handler object a route row points at (routes.cc).
  template <class Part>
  Part& part();
  // The sandboxes `principal` sees that carry every label of `selector`.
  std::vector<SandboxInfo> list_for(const Principal& principal, const Labels& selector);
  // The ExecOptions of a request: its timeout (else max_exec_timeout_seconds), env, cwd, stdin.
  ExecOptions exec_options(ExecRequest request, std::size_t max_output) const;
  // Runs a command and counts it in the metrics (pvs_exec_total, pvs_exec_duration_seconds).
  Result<ExecResult> run_exec(Sandbox& sandbox, std::string command, ExecOptions options);
  // files/edit: the file read whole (at most kMaxEditFileBytes, text only), the edit applied,
  // written back atomically (temporary file beside it, renamed over it) with its mode.
  EditReply edit_file(Sandbox& sandbox, const EditRequest& request);
  // Terminals (terminal_ops.cc). A terminal of a sandbox `who` may use, else 404.
  std::shared_ptr<TerminalEntry> terminal_for(const Principal& who, const std::string& sandbox,
                                              const std::string& tid);
  // Opens a terminal owned by `who` (429 at the per-sandbox or per-token limit).
  // What opening a terminal asks the policy: terminal.open, and exec for its command (as the
  // exec route asks); the stricter decision (deny, approve, allow) with its request.
  std::pair<PolicyRequest, PolicyDecision> judge_terminal_open(
      const Principal& who, const TerminalCreateRequest& request) const;
  std::shared_ptr<TerminalEntry> open_terminal(const Principal& who, Sandbox& sandbox,
                                               const TerminalCreateRequest& request);
  // Types into a terminal once the policy allows the lines the input completes (terminal.input,
  // each line judged alone, see typed_line.h and admit_lines; no complete line: nothing to judge).
  // `typed` is the input as bytes, `send` writes it. Pending (approve, not yet decided):
  // nothing was sent. A refusal (PolicyRefusal: deny, denied, expired) sends C-u first, so the
  // shell's line and the judged one stay the same. Errors of `send`: 400, 413 or 409 (ended).
  Admission type_into(const Principal& who, TerminalEntry& entry, std::string_view typed,
                      const std::function<Status()>& send, const std::string& approval_id,
                      bool async, const WaitProgress& progress = {});
  void close_terminal(TerminalEntry& entry);  // hangs up and forgets it
  // Waits for the condition; the JSON of the outcome, the terminal and its screen.
  std::string wait_terminal(TerminalEntry& entry, const TerminalWaitRequest& request);
  // Appends a record to the audit log (a failure is counted and logged, never thrown).
  void append_audit(const AuditRecord& record);
  TokenLimits& limits() { return limits_; }

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

  // Hangs up every terminal WebSocket and joins their threads (HttpServer::stop).
  void stop_websockets();

 private:
  void collect(Metrics& metrics);  // the Manager's state into /metrics, at each scrape
  void dispatch(RequestContext& ctx);
  void authenticate(RequestContext& ctx);  // throws ApiError 401 / 429

  void health(RequestContext& ctx);
  void openapi(RequestContext& ctx);
  void metrics_text(RequestContext& ctx);
  void create(RequestContext& ctx);
  void list(RequestContext& ctx);
  void show(RequestContext& ctx);
  void destroy(RequestContext& ctx);
  void exec(RequestContext& ctx);
  void exec_stream(RequestContext& ctx, const std::shared_ptr<Sandbox>& sandbox,
                   std::string command, ExecOptions options);
  void account_exec(const Result<ExecResult>& r, std::chrono::steady_clock::time_point start);
  void get_file(RequestContext& ctx);
  void put_file(RequestContext& ctx);
  void files_edit(RequestContext& ctx);
  // MCP over Streamable HTTP (mcp/transport.cc).
  void mcp_post(RequestContext& ctx);
  void mcp_delete(RequestContext& ctx);
  void mcp_error(RequestContext& ctx, int status, int code, const std::string& message);
  void mcp_sse(RequestContext& ctx, const mcp::Session& session, const mcp::Message& m,
               const std::string& progress_token);
  // A request of revision 2026-07-28 (mcp/transport_modern.cc): no session, checked alone.
  void mcp_modern(RequestContext& ctx, const mcp::Message& m, bool sse_ok);
  void internet(RequestContext& ctx);
  void ttl(RequestContext& ctx);
  void snapshot_create(RequestContext& ctx);
  void snapshot_list(RequestContext& ctx);
  void snapshot_rollback(RequestContext& ctx);
  void snapshot_delete(RequestContext& ctx);
  // terminal.input: each completed line judged alone, admitted once (terminal_ops.cc).
  Admission admit_lines(const Principal& who, TerminalEntry& entry,
                        const std::vector<std::string>& lines, const std::string& approval_id,
                        bool async, const WaitProgress& progress);
  // Terminals (routes_terminals.cc, routes_terminal_ws.cc).
  void terminal_create(RequestContext& ctx);
  void terminal_list(RequestContext& ctx);
  void terminal_show(RequestContext& ctx);
  void terminal_delete(RequestContext& ctx);
  void terminal_resize(RequestContext& ctx);
  void terminal_input(RequestContext& ctx);
  void terminal_screen(RequestContext& ctx);
  void terminal_wait(RequestContext& ctx);
  void terminal_ws(RequestContext& ctx);
  void ws_session(WsConnection& conn, TerminalWatcher& watcher, TerminalEntry& entry, bool watch,
                  const Principal& who, AuditRecord refusal);         // off the pool (WsSessions)
  std::shared_ptr<TerminalEntry> find_terminal(RequestContext& ctx);  // throws ApiError 404
  static ApiError conflict_ended(const TerminalEntry& entry);

  // Helpers.
  std::shared_ptr<Manager> require_manager();
  std::shared_ptr<Sandbox> find_sandbox(RequestContext& ctx);  // throws ApiError
  void finish(RequestContext& ctx);
  // The audit record of a mutating call (ctx.action), before its reply leaves.
  void audit(RequestContext& ctx, int status, const ApiError* error);
  void audit_denied(RequestContext& ctx, const DeniedLog::Line& line, std::string_view reason);
  void drain_body(RequestContext& ctx);

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
  // /v1/health asks Proxmox and the agent; its answer is reused for a second (it is public).
  std::mutex health_mu_;  // one refresh at a time; guards the three below
  std::chrono::steady_clock::time_point health_at_{};
  Health health_;
  std::uint64_t health_live_ = 0;
  std::atomic<std::uint64_t> next_request_{1};
  std::string request_prefix_;
  std::shared_ptr<mcp::SessionStore> mcp_sessions_;      // MCP sessions (mcp/session.h)
  std::shared_ptr<const mcp::ModernServer> mcp_modern_;  // revision 2026-07-28's constants
  // Terminals, closed with their sandbox (Api::destroy) or when idle.
  std::unique_ptr<TerminalRegistry> terminals_ = std::make_unique<TerminalRegistry>(
      TerminalRegistry::Limits{config_.terminal_max_per_sandbox, config_.terminal_max_per_token,
                               std::chrono::seconds(config_.terminal_idle_timeout_seconds)});
  // Terminal WebSockets, each on a thread of its own after the upgrade (ws_sessions.h).
  std::unique_ptr<WsSessions> ws_sessions_ = std::make_unique<WsSessions>(WsSessions::Limits{
      config_.terminal_max_websockets_per_token, config_.terminal_max_websockets});
  PolicyGate gate_{config_, metrics_, *this};
  ApprovalRoutes approval_routes_{gate_, *this};
  AuditRoutes audit_routes_{audit_ ? config_.audit_file : std::string(), *this};
  ConsoleRoutes console_routes_{*this};
  FleetRoutes fleet_routes_{[this] { return require_manager(); }, *this};
  E2bRoutes::Deps e2b_deps();         // e2b/e2b_deps.cc
  E2bRoutes e2b_routes_{e2b_deps()};  // the E2B-compatible API (docs/e2b.md)
};

// Revision 2026-07-28's constants of this controller: its identity, capabilities, the key that
// seals requestState (mcp/transport_modern.cc).
std::shared_ptr<const mcp::ModernServer> make_mcp_modern(const ServiceConfig& config);

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
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  std::uint16_t port_ = 0;
};

// The JSON of a sandbox, as the API returns it.
std::string sandbox_json(const SandboxInfo& info);
class JsonWriter;
// One pool as GET /v1/pools and GET /v1/nodes show it.

// Reads a small unread request body now; marks a large or chunked one for drain_body().
void settle_body(RequestContext& ctx);
// "Bearer <token>" from a WebSocket subprotocol "bearer.<token>" (routes_terminal_ws.cc); "".
std::string websocket_bearer(const Poco::Net::HTTPServerRequest& request);

}  // namespace pvs::service
