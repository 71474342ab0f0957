#include "api/mcp/modern_dispatch.h"

#include "api/mcp/modern_result.h"
#include "api/mcp/request_state.h"

namespace pvs::service::mcp {

namespace {

ModernReply error_reply(const std::string& id, const WireError& e) {
  return {e.http_status, wire_error_json(id, e)};
}

ModernReply ok_reply(const std::string& id, const std::string& result) {
  return {200, result_json(id, result)};
}

// A tools/call's own checks: the tool, its arguments, a requestState of an earlier round.
ModernStep prepare_call(const ModernServer& server, const Message& m, RequestMeta meta,
                        const std::string& token, std::int64_t now) {
  Poco::Dynamic::Var name = m.params->get("name");
  if (!name.isString())
    return error_reply(m.id, invalid_params("params.name: required (a tool's name)"));
  ModernCall call;
  call.id = m.id;
  call.tool = find_tool(name.extract<std::string>());
  if (!call.tool)
    return error_reply(m.id, {200, kInvalidParams,
                              "unknown tool: " + name.extract<std::string>().substr(0, 100), ""});
  if (m.params->has("arguments") && !m.params->isNull("arguments")) {
    Poco::Dynamic::Var args = m.params->get("arguments");
    if (args.type() != typeid(Poco::JSON::Object::Ptr))
      return error_reply(m.id, invalid_params("params.arguments: must be an object"));
    call.arguments = args.extract<Poco::JSON::Object::Ptr>();
  }
  if (!call.arguments) call.arguments = new Poco::JSON::Object;
  call.digest = arguments_digest(to_json(call.arguments));
  if (m.params->has("requestState")) {
    Poco::Dynamic::Var s = m.params->get("requestState");
    if (!s.isString())
      return error_reply(m.id, invalid_params("params.requestState: must be a string"));
    auto state = open_state(s.extract<std::string>(), server.state_key, now);
    if (!state) return error_reply(m.id, invalid_params("params.requestState: " + state.error()));
    if (!state_matches(*state, token, call.tool->name, call.digest))
      return error_reply(m.id, invalid_params("params.requestState: it belongs to another call "
                                              "(send it only with the same tool and arguments)"));
    call.resume_approval = state->approval_id;
  }
  call.meta = std::move(meta);
  return call;
}

}  // namespace

ModernStep prepare_modern(const ModernServer& server, const Message& m,
                          const RequestHeaders& headers, const std::string& token,
                          std::int64_t now) {
  if (m.kind != Message::Kind::kRequest) return ModernReply{202, ""};
  auto meta = check_modern_request(m, headers);
  if (!meta) return error_reply(m.id, meta.error());
  if (m.method == "server/discover")
    return ok_reply(m.id, discover_result(server.capabilities_json, server.instructions,
                                          server.server_info_json, {server.list_ttl_ms, false}));
  if (m.method == "tools/list")
    return ok_reply(m.id, complete_result(tools_list_json(), server.server_info_json,
                                          {server.list_ttl_ms, false}));
  if (m.method == "tools/call") return prepare_call(server, m, std::move(*meta), token, now);
  return error_reply(m.id, method_not_found(m.method));
}

ModernReply finish_modern_call(const ModernServer& server, const ModernCall& call,
                               const ModernOutcome& outcome, const std::string& token,
                               std::int64_t now) {
  if (outcome.pending_approval) {
    PendingState state{*outcome.pending_approval, token, std::string(call.tool->name), call.digest,
                       now + server.state_ttl_seconds};
    return ok_reply(call.id, input_required_result(seal_state(state, server.state_key),
                                                   server.server_info_json));
  }
  return ok_reply(call.id,
                  complete_result(tool_result_json(outcome.result), server.server_info_json));
}

}  // namespace pvs::service::mcp
