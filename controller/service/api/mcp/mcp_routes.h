// MCP over Streamable HTTP at /mcp (room api/mcp/): POST carries JSON-RPC, answered as JSON or
// as an SSE stream of progress then the result (transport.cc: revisions up to 2025-06-18, with
// sessions; transport_modern.cc: 2026-07-28, each request alone); DELETE ends a session. A
// handler class with narrow dependencies: the config (mcp:), the token limits (SSE streams),
// the reply helpers, the audit sink and the operations the tools run on (tools.h: ToolOps). It
// owns the legacy session store and revision 2026-07-28's constants.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/mcp/tools.h"
#include "core/config/config.h"
#include "core/observability/audit.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/token_limits.h"

namespace pvs::service {

namespace mcp {
class SessionStore;
struct Session;
struct ModernServer;
struct Message;
}  // namespace mcp

class McpRoutes {
 public:
  struct Deps {
    const ServiceConfig& config;
    TokenLimits& limits;
    Replies& replies;
    std::function<void(const AuditRecord&)> audit;  // the session records
    mcp::ToolOps tools;
  };
  explicit McpRoutes(Deps deps);
  ~McpRoutes();

  void post(RequestContext& ctx);    // POST /mcp
  void remove(RequestContext& ctx);  // DELETE /mcp

 private:
  void error(RequestContext& ctx, int status, int code, const std::string& message);
  void sse(RequestContext& ctx, const mcp::Session& session, const mcp::Message& m,
           const std::string& progress_token);
  // The reply as an SSE stream: notifications/progress for `progress_token` while `run` runs,
  // then what it returns (an exception: an internal error of request `id`). `unbuffered`:
  // X-Accel-Buffering: no.
  void stream(RequestContext& ctx, bool unbuffered, const std::string& progress_token,
              const std::string& id,
              const std::function<std::string(const mcp::ToolCall::Progress&)>& run);
  // A request of revision 2026-07-28 (transport_modern.cc): no session, checked alone.
  void modern(RequestContext& ctx, const mcp::Message& m, bool sse_ok);

  Deps d_;
  std::shared_ptr<mcp::SessionStore> sessions_;      // legacy sessions (session.h)
  std::shared_ptr<const mcp::ModernServer> modern_;  // revision 2026-07-28's constants
};

// Revision 2026-07-28's constants of this controller: its identity, capabilities, the key that
// seals requestState (transport_modern.cc).
std::shared_ptr<const mcp::ModernServer> make_mcp_modern(const ServiceConfig& config);

}  // namespace pvs::service
