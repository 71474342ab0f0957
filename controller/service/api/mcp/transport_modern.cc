// /mcp for revision 2026-07-28: a request that carries its revision in params._meta (or a
// modern MCP-Protocol-Version header) is served here, alone: no initialize, no session, its
// headers checked against its body (mcp/modern_dispatch.h). A tools/call runs on the same tools
// as the legacy revisions; with a progressToken and an Accept of text/event-stream, a long tool
// answers as an SSE stream of progress notifications and then its result. A call still
// waiting for a person's approval when it stops waiting answers input_required with a sealed
// requestState, and the client's retry with it resumes that approval.
#include <ctime>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "api/mcp/mcp_routes.h"
#include "api/mcp/modern_dispatch.h"
#include "api/mcp/modern_result.h"
#include "api/mcp/request_state.h"
#include "api/mcp/tools.h"
#include "http/json.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/version.h"

namespace pvs::service {

namespace {

std::optional<std::string> header(RequestContext& ctx, const char* name) {
  if (!ctx.request->has(name)) return std::nullopt;
  return ctx.request->get(name);
}

}  // namespace

std::shared_ptr<const mcp::ModernServer> make_mcp_modern(const ServiceConfig& config) {
  auto s = std::make_shared<mcp::ModernServer>();
  s->server_info_json = mcp::server_info_json(
      mcp::ServerInfo{"pve-sandbox", std::string(pvs::version()), "pve-sandbox"});
  s->capabilities_json = R"({"tools":{"listChanged":false}})";
  s->instructions = std::string(mcp::server_instructions());
  s->state_key = mcp::new_state_key();
  // A pending approval's state outlives the approval itself (which then reports expired).
  s->state_ttl_seconds = config.approval_timeout_seconds + config.approval_wait_seconds + 60;
  return s;
}

void McpRoutes::modern(RequestContext& ctx, const mcp::Message& m, bool sse_ok) {
  const mcp::ModernServer& server = *modern_;
  mcp::RequestHeaders headers{ctx.request->get("MCP-Protocol-Version", ""),
                              header(ctx, "Mcp-Method"), header(ctx, "Mcp-Name")};
  if (headers.name) headers.name = mcp::restore_sentinel(*headers.name);
  const std::string& token = ctx.principal->name;
  auto step = mcp::prepare_modern(server, m, headers, token, std::time(nullptr));
  if (const auto* reply = std::get_if<mcp::ModernReply>(&step)) {
    if (reply->http_status == 202) return d_.replies.send_empty(ctx, 202);
    return d_.replies.send_bytes(ctx, reply->http_status, "application/json", reply->body);
  }
  const mcp::ModernCall& call = std::get<mcp::ModernCall>(step);
  std::string pending;
  mcp::ToolCall tc;
  tc.principal = *ctx.principal;
  tc.request_id = ctx.request_id;
  tc.remote = ctx.request->clientAddress().host().toString();
  tc.name = std::string(call.tool->name);
  tc.arguments = call.arguments;
  tc.resume_approval = call.resume_approval;
  tc.pending_approval = &pending;
  auto finish = [&](const mcp::ToolResult& result) {
    mcp::ModernOutcome outcome{result, std::nullopt};
    if (!pending.empty()) outcome.pending_approval = pending;
    return mcp::finish_modern_call(server, call, outcome, token, std::time(nullptr));
  };
  const std::string& progress_token = call.meta.progress_token;
  bool streamed = sse_ok && call.tool->progress && !progress_token.empty();
  auto slot =
      streamed ? d_.limits.acquire(ctx.principal->name, TokenLimits::Kind::kStream) : std::nullopt;
  if (!slot) {  // plain JSON: no progress asked, or the token's streams are in use
    auto reply = finish(mcp::run_tool(d_.tools, tc));
    return d_.replies.send_bytes(ctx, reply.http_status, "application/json", reply.body);
  }
  stream(ctx, true, progress_token, call.id, [&](const mcp::ToolCall::Progress& progress) {
    tc.progress = progress;
    return finish(mcp::run_tool(d_.tools, tc)).body;
  });
}

}  // namespace pvs::service
