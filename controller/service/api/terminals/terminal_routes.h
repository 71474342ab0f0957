// Terminals in a sandbox (room api/terminals/): POST/GET /v1/sandboxes/{id}/terminals, GET and
// DELETE .../terminals/{tid}, POST .../resize, .../input, .../wait, GET .../screen and the
// terminal's WebSocket GET .../ws (routes_terminal_ws.cc, off the HTTP pool: ws_sessions.h).
// A handler class with narrow dependencies: the config's limits, the sandboxes a caller may
// use (SandboxOps), the policy gate (terminal.open, terminal.input a line at a time,
// terminal.attach), the terminal registry, the reply helpers and the audit sink.
//
// What the MCP terminal tools share with these routes (terminal_ops.cc): terminal_for,
// judge_terminal_open, open_terminal, type_into, close_terminal, wait_terminal.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/sandboxes/sandbox_ops.h"
#include "api/terminals/terminals.h"
#include "core/config/config.h"
#include "core/observability/audit.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/terminal_requests.h"
#include "http/ws_sessions.h"
#include "policy/gate.h"

namespace pvs::service {

struct WsConnection;  // routes_terminal_ws.cc

class TerminalRoutes {
 public:
  struct Deps {
    const ServiceConfig& config;
    SandboxOps& sandboxes;
    PolicyGate& gate;
    TerminalRegistry& terminals;
    Replies& replies;
    std::function<void(const AuditRecord&)> audit;  // a record of its own (a refused line)
  };
  explicit TerminalRoutes(Deps deps)
      : d_(std::move(deps)),
        ws_sessions_(WsSessions::Limits{d_.config.terminal_max_websockets_per_token,
                                        d_.config.terminal_max_websockets}) {}

  // Routes (routes_terminals.cc, routes_terminal_ws.cc).
  void create(RequestContext& ctx);
  void list(RequestContext& ctx);
  void show(RequestContext& ctx);
  void close(RequestContext& ctx);
  void resize(RequestContext& ctx);
  void input(RequestContext& ctx);
  void screen(RequestContext& ctx);
  void wait(RequestContext& ctx);
  void websocket(RequestContext& ctx);
  // Hangs up every terminal WebSocket and joins their threads (HttpServer::stop).
  void stop_websockets();

  // ---- What the routes and the MCP terminal tools share (terminal_ops.cc; throw ApiError) ----
  // A terminal of a sandbox `who` may use, else 404.
  std::shared_ptr<TerminalEntry> terminal_for(const Principal& who, const std::string& sandbox,
                                              const std::string& tid);
  // What opening a terminal asks the policy: terminal.open, and exec for its command (as the
  // exec route asks); the stricter decision (deny, approve, allow) with its request.
  std::pair<PolicyRequest, PolicyDecision> judge_terminal_open(
      const Principal& who, const TerminalCreateRequest& request) const;
  // Opens a terminal owned by `who` (429 at the per-sandbox or per-token limit).
  std::shared_ptr<TerminalEntry> open_terminal(const Principal& who, Sandbox& sandbox,
                                               const TerminalCreateRequest& request);
  // Types into a terminal once the policy allows the lines the input completes (terminal.input,
  // each line judged alone, see typed_line.h and admit_lines; no complete line: nothing to judge).
  // `typed` is the input as bytes, `send` writes it. Pending (approve, not yet decided):
  // nothing was sent. A refusal (PolicyRefusal: deny, denied, expired) sends C-u first, so the
  // shell's line and the judged one stay the same. Errors of `send`: 400, 413 or 409 (ended).
  PolicyGate::Admission type_into(const Principal& who, TerminalEntry& entry,
                                  std::string_view typed, const std::function<Status()>& send,
                                  const std::string& approval_id, bool async,
                                  const PolicyGate::WaitProgress& progress = {});
  void close_terminal(TerminalEntry& entry);  // hangs up and forgets it
  // Waits for the condition; the JSON of the outcome, the terminal and its screen.
  std::string wait_terminal(TerminalEntry& entry, const TerminalWaitRequest& request);

 private:
  // terminal.input: each completed line judged alone, admitted once (terminal_ops.cc).
  PolicyGate::Admission admit_lines(const Principal& who, TerminalEntry& entry,
                                    const std::vector<std::string>& lines,
                                    const std::string& approval_id, bool async,
                                    const PolicyGate::WaitProgress& progress);
  void ws_session(WsConnection& conn, TerminalWatcher& watcher, TerminalEntry& entry, bool watch,
                  const Principal& who, AuditRecord refusal);         // off the pool (WsSessions)
  std::shared_ptr<TerminalEntry> find_terminal(RequestContext& ctx);  // throws ApiError 404
  static ApiError conflict_ended(const TerminalEntry& entry);

  Deps d_;
  // Terminal WebSockets, each on a thread of its own after the upgrade (ws_sessions.h). Last:
  // its sessions use the members above until it has joined them.
  WsSessions ws_sessions_;
};

// "Bearer <token>" from a WebSocket subprotocol "bearer.<token>" (routes_terminal_ws.cc); "".
std::string websocket_bearer(const Poco::Net::HTTPServerRequest& request);

}  // namespace pvs::service
