// What the tool handlers (tools.cc, tools_files.cc) share: the call's context, its audit
// record, and strict argument parsing on the REST API's own validators.
#pragma once

#include <string>

#include "api/files/file_routes.h"
#include "api/mcp/tools.h"
#include "api/sandboxes/sandbox_routes.h"
#include "api/terminals/terminal_routes.h"
#include "core/observability/audit.h"
#include "http/json.h"

namespace pvs::service::mcp {

struct ToolContext {
  const ToolOps& ops;
  PolicyGate& gate;  // admit_tool: the policy's say on the call (ops.gate)
  const ToolCall& call;
  AuditRecord record;  // filled by the handler: sandbox, params_json

  // The arguments as JSON text (for the REST parsers: parse_create, parse_exec, ...).
  std::string arguments_json() const;
  // Removes "sandbox_id" (required, a sandbox id) from a copy of the arguments: the id and the
  // JSON text of the rest. Throws ApiError 400.
  std::pair<std::string, std::string> split_sandbox_id() const;
  // sandbox_for(principal, id), with the id on the audit record.
  std::shared_ptr<Sandbox> sandbox(const std::string& id);
};

// The handlers: each returns its result or throws ApiError (turned into an is_error result).
ToolResult tool_read_file(ToolContext& c);
ToolResult tool_write_file(ToolContext& c);
ToolResult tool_edit_file(ToolContext& c);
ToolResult tool_list_dir(ToolContext& c);
ToolResult tool_terminal_open(ToolContext& c);  // tools_terminals.cc
ToolResult tool_terminal_input(ToolContext& c);
ToolResult tool_terminal_screen(ToolContext& c);
ToolResult tool_terminal_close(ToolContext& c);

// A JSON string literal.
inline std::string to_json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

// A JsonBody of `text`, or throws its error.
JsonBody parse_arguments(const std::string& text);
// Throws the first error of a body the handler read (an unknown argument, a wrong type).
void finish_arguments(const JsonBody& body);

}  // namespace pvs::service::mcp
