// MCP over Streamable HTTP at /mcp: POST carries JSON-RPC (one message; a batch at revision
// 2025-03-26), answered as application/json, or as an SSE stream (text/event-stream) when a
// tools/call of a long tool asks for progress; DELETE ends the session; GET is 405 (no
// server-initiated stream). Authentication, per-token limits and metrics are the REST
// pipeline's (the route table); the tools run on the REST API's operations (tools.cc).
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/mcp_routes.h"
#include "api/mcp/modern.h"
#include "api/mcp/protocol.h"
#include "api/mcp/session.h"
#include "api/mcp/tools.h"
#include "http/json.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/version.h"

namespace pvs::service {

using mcp::Message;

namespace {

std::string initialize_result(std::string_view version) {
  JsonWriter w;
  w.begin_object().key("protocolVersion").value(version);
  w.key("capabilities").begin_object().key("logging").begin_object().end_object();
  w.key("tools").begin_object().key("listChanged").value(false).end_object().end_object();
  w.key("serverInfo").begin_object().key("name").value("pve-sandbox");
  w.key("title").value("pve-sandbox").key("version").value(pvs::version()).end_object();
  w.key("instructions").value(mcp::server_instructions());
  return w.end_object().take();
}

std::string remote_of(RequestContext& ctx) {
  return ctx.request->clientAddress().host().toString();
}

AuditRecord session_record(RequestContext& ctx, std::string action, std::string params,
                           int status) {
  AuditRecord r;
  r.request_id = ctx.request_id;
  r.token = ctx.principal->name;
  r.remote = remote_of(ctx);
  r.action = std::move(action);
  r.params_json = std::move(params);
  r.status = status;
  r.duration_ms = static_cast<std::int64_t>(seconds_since(ctx.start) * 1000);
  return r;
}

// What a request needs besides its message.
struct Call {
  RequestContext& ctx;
  const mcp::Session& session;
  std::function<void(double, double, const std::string&)> progress;  // null: none asked
};

}  // namespace

McpRoutes::McpRoutes(Deps deps)
    : d_(std::move(deps)),
      sessions_(mcp::make_session_store(d_.config.mcp)),
      modern_(make_mcp_modern(d_.config)) {}

McpRoutes::~McpRoutes() = default;

void McpRoutes::error(RequestContext& ctx, int status, int code, const std::string& message) {
  d_.replies.send_bytes(ctx, status, "application/json", mcp::error_json("null", code, message));
}

namespace {

// A request of an open session (anything but initialize): the JSON-RPC response.
std::string mcp_request(const mcp::ToolOps& ops, const Call& call, const Message& m) {
  if (m.method == "ping") return mcp::result_json(m.id, "{}");
  if (m.method == "tools/list") return mcp::result_json(m.id, mcp::tools_list_json());
  if (m.method == "logging/setLevel") {
    // The level filters notifications/message; this server sends none, so any level holds.
    Poco::Dynamic::Var level = m.params->get("level");
    if (!level.isString() || !mcp::is_log_level(level.extract<std::string>()))
      return mcp::error_json(m.id, mcp::kInvalidParams,
                             "params.level: one of debug, info, notice, warning, error, "
                             "critical, alert, emergency");
    return mcp::result_json(m.id, "{}");
  }
  if (m.method == "initialize")
    return mcp::error_json(m.id, mcp::kInvalidRequest,
                           "this session is initialized; a new one starts with initialize "
                           "without an Mcp-Session-Id header");
  if (m.method != "tools/call")
    return mcp::error_json(m.id, mcp::kMethodNotFound,
                           "method not found: " + m.method.substr(0, 100));
  Poco::Dynamic::Var name = m.params->get("name");
  if (!name.isString())
    return mcp::error_json(m.id, mcp::kInvalidParams, "params.name: required (a tool's name)");
  const mcp::ToolDef* tool = mcp::find_tool(name.extract<std::string>());
  if (!tool)
    return mcp::error_json(m.id, mcp::kInvalidParams,
                           "unknown tool: " + name.extract<std::string>().substr(0, 100));
  mcp::ToolCall tc;
  tc.principal = *call.ctx.principal;
  tc.request_id = call.ctx.request_id;
  tc.remote = remote_of(call.ctx);
  tc.session = call.session.id;
  tc.name = std::string(tool->name);
  if (m.params->has("arguments") && !m.params->isNull("arguments")) {
    Poco::Dynamic::Var args = m.params->get("arguments");
    if (args.type() != typeid(Poco::JSON::Object::Ptr))
      return mcp::error_json(m.id, mcp::kInvalidParams, "params.arguments: must be an object");
    tc.arguments = args.extract<Poco::JSON::Object::Ptr>();
  }
  if (!tc.arguments) tc.arguments = new Poco::JSON::Object;
  tc.progress = call.progress;
  return mcp::result_json(m.id, mcp::tool_result_json(mcp::run_tool(ops, tc)));
}

// The progress token of a request (params._meta.progressToken) as JSON, or "".
std::string progress_token(const Message& m) {
  Poco::Dynamic::Var meta = m.params->get("_meta");
  if (meta.type() != typeid(Poco::JSON::Object::Ptr)) return "";
  auto o = meta.extract<Poco::JSON::Object::Ptr>();
  return o && o->has("progressToken") ? mcp::id_json(o->get("progressToken")) : "";
}

}  // namespace

void McpRoutes::post(RequestContext& ctx) {
  if (!d_.config.mcp.enabled) throw not_found("no such endpoint: /mcp (mcp.enabled is false)");
  const std::string origin = ctx.request->get("Origin", "");
  if (!mcp::origin_allowed(origin, d_.config.mcp.allowed_origins))
    return error(ctx, 403, mcp::kServerError,
                 "Origin " + origin.substr(0, 100) + " is not allowed (mcp.allowed_origins)");
  const std::string& type = ctx.request->getContentType();
  if (type.rfind("application/json", 0) != 0)
    return error(ctx, 415, mcp::kServerError, "send JSON-RPC as Content-Type: application/json");
  const std::string accept = ctx.request->get("Accept", "");
  bool sse_ok = !accept.empty() && mcp::accepts(accept, "text/event-stream");
  if (!mcp::accepts(accept, "application/json") && !sse_ok)
    return error(ctx, 406, mcp::kServerError,
                 "Accept must include application/json and text/event-stream");
  const std::string version = ctx.request->get("MCP-Protocol-Version", "");
  auto parsed = mcp::parse_messages(d_.replies.read_body(ctx, d_.config.max_body_bytes));
  if (parsed.fatal)
    return d_.replies.send_bytes(
        ctx, 400, "application/json",
        mcp::error_json(parsed.fatal->id, parsed.fatal->code, parsed.fatal->message));
  // The era of this request, from this request alone (mcp/modern.h).
  if (parsed.batch && mcp::is_modern_version(version))
    return error(ctx, 400, mcp::kInvalidRequest,
                 "revision 2026-07-28 has no batches: send one message per request");
  if (const auto* one = parsed.batch ? nullptr : std::get_if<Message>(&parsed.items[0]);
      one && mcp::request_era(*one, version) == mcp::Era::kModern)
    return modern(ctx, *one, sse_ok);
  if (!version.empty() && !mcp::supported_version(version))
    return error(ctx, 400, mcp::kServerError,
                 "unsupported MCP-Protocol-Version " + version.substr(0, 40));
  const std::string session_id = ctx.request->get("Mcp-Session-Id", "");
  const Message* single = parsed.batch ? nullptr : std::get_if<Message>(&parsed.items[0]);
  if (single && single->kind == Message::Kind::kRequest && single->method == "initialize") {
    if (!session_id.empty())
      return error(ctx, 400, mcp::kInvalidRequest,
                   "initialize starts a new session: send it without Mcp-Session-Id");
    Poco::Dynamic::Var requested = single->params->get("protocolVersion");
    if (!requested.isString())
      return d_.replies.send_json(
          ctx, 200,
          mcp::error_json(single->id, mcp::kInvalidParams, "params.protocolVersion: required"));
    std::string client;
    if (auto info = single->params->getObject("clientInfo"); info && info->get("name").isString())
      client = info->get("name").extract<std::string>();
    auto negotiated = mcp::negotiate_version(requested.extract<std::string>());
    mcp::Session s = sessions_->open(ctx.principal->name, std::string(negotiated), client);
    JsonWriter p;
    p.begin_object().key("client").value(s.client).key("protocol_version").value(negotiated);
    d_.audit(session_record(ctx, "mcp.session.open", p.end_object().take(), 200));
    ctx.response->set("Mcp-Session-Id", s.id);
    return d_.replies.send_json(ctx, 200,
                                mcp::result_json(single->id, initialize_result(negotiated)));
  }
  if (session_id.empty())
    return error(ctx, 400, mcp::kServerError,
                 "Mcp-Session-Id header required: start with initialize");
  auto session = sessions_->use(session_id, ctx.principal->name);
  if (!session)
    return error(ctx, 404, mcp::kServerError,
                 "no such session (ended or expired): initialize a new one");
  if (!version.empty() && version != session->protocol_version)
    return error(ctx, 400, mcp::kServerError,
                 "MCP-Protocol-Version " + version + " is not this session's (" +
                     session->protocol_version + ")");
  if (parsed.batch && !mcp::batches_allowed(session->protocol_version))
    return error(ctx, 400, mcp::kInvalidRequest,
                 "JSON-RPC batches are not part of protocol revision " + session->protocol_version +
                     ": send one message per request");
  std::vector<std::string> responses;
  for (const auto& item : parsed.items) {
    if (const auto* bad = std::get_if<mcp::Invalid>(&item)) {
      if (!parsed.batch)
        return d_.replies.send_bytes(ctx, 400, "application/json",
                                     mcp::error_json(bad->id, bad->code, bad->message));
      responses.push_back(mcp::error_json(bad->id, bad->code, bad->message));
      continue;
    }
    const Message& m = std::get<Message>(item);
    if (m.kind == Message::Kind::kNotification && m.method == "notifications/initialized")
      sessions_->mark_initialized(session->id);
    if (m.kind != Message::Kind::kRequest) continue;  // notifications and responses: 202
    const mcp::ToolDef* tool = nullptr;
    if (m.method == "tools/call" && m.params->get("name").isString())
      tool = mcp::find_tool(m.params->get("name").extract<std::string>());
    std::string token = progress_token(m);
    if (!parsed.batch && sse_ok && tool && tool->progress && !token.empty()) {
      auto slot = d_.limits.acquire(ctx.principal->name, TokenLimits::Kind::kStream);
      if (slot) return sse(ctx, *session, m, token);
      // The token's streams are all in use: answered as JSON, without progress.
    }
    responses.push_back(mcp_request(d_.tools, Call{ctx, *session, nullptr}, m));
  }
  if (responses.empty()) return d_.replies.send_empty(ctx, 202);
  if (!parsed.batch) return d_.replies.send_json(ctx, 200, responses[0]);
  std::string out = "[";
  for (std::size_t i = 0; i < responses.size(); ++i) out += (i ? "," : "") + responses[i];
  d_.replies.send_json(ctx, 200, out + "]");
}

// One request answered as an SSE stream: progress notifications, then its response.
void McpRoutes::sse(RequestContext& ctx, const mcp::Session& session, const Message& m,
                    const std::string& token) {
  stream(ctx, false, token, m.id, [&](const mcp::ToolCall::Progress& progress) {
    return mcp_request(d_.tools, Call{ctx, session, progress}, m);
  });
}

void McpRoutes::stream(RequestContext& ctx, bool unbuffered, const std::string& progress_token,
                       const std::string& id,
                       const std::function<std::string(const mcp::ToolCall::Progress&)>& run) {
  d_.replies.begin_reply(ctx, 200, "text/event-stream");
  ctx.response->set("Cache-Control", "no-cache");
  if (unbuffered) ctx.response->set("X-Accel-Buffering", "no");
  ctx.response->setChunkedTransferEncoding(true);
  std::ostream& out = ctx.response->send();
  auto emit = [&out](const std::string& json) {
    if (!out.good()) return;  // the client went away: the call still runs to its end
    out << "event: message\ndata: " << json << "\n\n";
    out.flush();
  };
  auto progress = [&](double done, double total, const std::string& message) {
    JsonWriter w;
    w.begin_object().key("progressToken").raw(progress_token).key("progress").value(done);
    w.key("total").value(total).key("message").value(message).end_object();
    emit(mcp::notification_json("notifications/progress", w.str()));
  };
  try {
    emit(run(progress));
  } catch (const std::exception& e) {
    log::error("request " + ctx.request_id + ": mcp: " + e.what());
    emit(mcp::error_json(id, mcp::kInternalError, "internal error"));
  }
}

void McpRoutes::remove(RequestContext& ctx) {
  if (!d_.config.mcp.enabled) throw not_found("no such endpoint: /mcp (mcp.enabled is false)");
  const std::string origin = ctx.request->get("Origin", "");
  if (!mcp::origin_allowed(origin, d_.config.mcp.allowed_origins))
    return error(ctx, 403, mcp::kServerError, "Origin is not allowed (mcp.allowed_origins)");
  const std::string session_id = ctx.request->get("Mcp-Session-Id", "");
  if (session_id.empty())
    return error(ctx, 400, mcp::kServerError, "Mcp-Session-Id header required");
  if (!sessions_->close(session_id, ctx.principal->name))
    return error(ctx, 404, mcp::kServerError, "no such session");
  d_.audit(session_record(ctx, "mcp.session.close", "{}", 204));
  d_.replies.send_empty(ctx, 204);
}

}  // namespace pvs::service
