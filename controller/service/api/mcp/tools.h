// The MCP tools: their definitions as tools/list shows them (tool_defs.cc, pure data) and the
// code that runs them (tools.cc: sandboxes and exec; tools_files.cc: files; tools_terminals.cc:
// terminals) on the same operations the REST handlers use (ToolOps), so ownership, limits and
// validation are the REST API's.
//
// Adding a tool is one row in kTools (tool_defs.cc) and one in the handler table (tools.cc).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <Poco/JSON/Object.h>

#include "http/auth.h"

namespace pvs::service {
struct AuditRecord;
struct ServiceConfig;
class PolicyGate;
class SandboxOps;
class SandboxRoutes;
class FileRoutes;
class TerminalRoutes;
class PortRoutes;
}  // namespace pvs::service

namespace pvs::service::mcp {

struct ToolDef {
  std::string_view name;
  std::string_view title;
  std::string_view description;   // for a model: what it does, when to use it, what it returns
  std::string_view input_schema;  // JSON Schema (an object schema)
  bool read_only = false;         // annotations (hints for clients)
  bool destructive = false;
  bool idempotent = false;
  bool progress = false;  // may run long (exec; any call a person may have to approve):
                          // answered as an SSE stream with progress when asked
};

std::span<const ToolDef> tool_defs();
// What the server tells a client about itself (initialize, server/discover).
std::string_view server_instructions();
const ToolDef* find_tool(std::string_view name);
// The result of tools/list: {"tools":[{"name","title","description","inputSchema",
// "annotations"}...]}.
std::string tools_list_json();

struct ToolCall {
  Principal principal;
  std::string request_id;
  std::string remote;   // the client's address, for the audit log
  std::string session;  // the MCP session id
  std::string name;
  Poco::JSON::Object::Ptr arguments;  // never null
  // Set when the client asked for progress (a progressToken, and it accepts an SSE reply):
  // called on the request's thread with a growing `progress`.
  using Progress = std::function<void(double progress, double total, const std::string& message)>;
  Progress progress;
  // Revision 2026-07-28: the approval an earlier round of this call waits for (from its
  // requestState), and where a call still waiting for a person leaves the approval's id (then
  // the transport answers input_required instead of the error result). Legacy: "", null.
  std::string resume_approval;
  std::string* pending_approval = nullptr;
};

struct ToolResult {
  bool is_error = false;   // a failure the model can act on (the message says what happened)
  std::string text;        // the content the model reads
  std::string structured;  // structuredContent (a JSON object), or empty
};

// {"content":[{"type":"text","text":...}],"structuredContent":...,"isError":...}
std::string tool_result_json(const ToolResult& result);

// What the tools run on: the REST API's own operations and services.
struct ToolOps {
  const ServiceConfig& config;
  PolicyGate& gate;           // admit_tool: the policy's say on a call
  SandboxOps& sandboxes;      // sandbox_for, create_for, list_for
  SandboxRoutes& exec;        // exec_options, run_exec
  FileRoutes& files;          // edit_file
  TerminalRoutes& terminals;  // terminal_for, open_terminal, type_into, wait_terminal, ...
  PortRoutes& ports;          // preview_link
  std::function<void(const AuditRecord&)> audit;
};

// Runs a tool that find_tool() knows; failures come back as is_error results. Every call is
// one audit record, action "mcp.<tool>" (exec also "mcp.exec.start" when it begins).
ToolResult run_tool(const ToolOps& ops, const ToolCall& call);

}  // namespace pvs::service::mcp
