// One request of revision 2026-07-28, from its checks to its JSON-RPC response, without the
// socket and without the code that runs tools (a callback): what `/mcp` does with a modern
// request, testable on its own.
//
//   auto step = mcp::prepare_modern(server, m, headers, token, now);
//   if (auto* reply = std::get_if<mcp::ModernReply>(&step)) return send(*reply);
//   auto& call = std::get<mcp::ModernCall>(step);        // a tools/call: run it (maybe as SSE)
//   mcp::ModernReply r = mcp::finish_modern_call(server, call, outcome, token, now);
//
// A call that waits for a person's approval and is still pending when it stops waiting comes
// back as an InputRequiredResult with a sealed requestState (request_state.h); the client's
// retry with that state resumes the same approval (ModernCall::resume_approval).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <Poco/JSON/Object.h>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/modern.h"
#include "api/mcp/tools.h"

namespace pvs::service::mcp {

struct ModernServer {
  std::string server_info_json;   // server_info_json(...)
  std::string capabilities_json;  // ServerCapabilities of server/discover
  std::string instructions;
  std::string state_key;                 // new_state_key(), for requestState
  std::int64_t state_ttl_seconds = 600;  // how long a pending approval's state stays valid
  std::int64_t list_ttl_ms = 300000;     // caching hint of tools/list and server/discover
};

// The HTTP status and body of a modern request's answer.
struct ModernReply {
  int http_status = 200;
  std::string body;  // a JSON-RPC response; "" for a notification (202)
};

// A tools/call that passed every check, for the caller to run.
struct ModernCall {
  std::string id;  // JSON-RPC id as JSON text
  const ToolDef* tool = nullptr;
  Poco::JSON::Object::Ptr arguments;  // never null
  RequestMeta meta;
  std::string digest;           // arguments_digest() of the arguments
  std::string resume_approval;  // from a valid requestState: the approval this call waits for
};

// What running the tool gave: its result, or the approval it is still waiting for.
struct ModernOutcome {
  ToolResult result;
  std::optional<std::string> pending_approval;  // "ap-...": answer input_required
};

using ModernStep = std::variant<ModernReply, ModernCall>;

// Checks and answers everything but a tool's run: notifications (202), server/discover,
// tools/list, malformed requests and unknown methods; a valid tools/call comes back to run.
// `token` is the caller's name (a requestState is bound to it), `now` Unix seconds.
ModernStep prepare_modern(const ModernServer& server, const Message& m,
                          const RequestHeaders& headers, const std::string& token,
                          std::int64_t now);

// The answer to a call once run: its result as a complete result, or an InputRequiredResult.
ModernReply finish_modern_call(const ModernServer& server, const ModernCall& call,
                               const ModernOutcome& outcome, const std::string& token,
                               std::int64_t now);

}  // namespace pvs::service::mcp
