// The REST API at a glance: every route, its handler, who may call it and what the audit log
// records. docs/api.md documents each; docs/openapi.json is the machine-readable form.
#include "http/server.h"

namespace pvs::service {

std::span<const Route> Api::routes() {
  using A = Route::Access;
  // clang-format off
  static constexpr Route kRoutes[] = {
      // method   pattern                                          handler                access      audit action
      {"GET",    "/v1/health",                                    &Api::health,           A::kPublic, ""},
      {"GET",    "/v1/openapi.json",                              &Api::openapi,          A::kPublic, ""},
      {"GET",    "/metrics",                                      &Api::metrics_text,     A::kPublic, ""},
      {"GET",    "/v1/pools",                                     &Api::pools,            A::kAdmin,  ""},
      {"GET",    "/v1/nodes",                                     &Api::nodes,            A::kAdmin,  ""},
      {"POST",   "/v1/nodes/{name}/drain",                        &Api::node_drain,       A::kAdmin,  "node.drain"},
      {"POST",   "/v1/nodes/{name}/undrain",                      &Api::node_undrain,     A::kAdmin,  "node.undrain"},
      {"GET",    "/v1/audit",                                     &Api::audit_tail,       A::kAdmin,  ""},
      {"POST",   "/v1/sandboxes",                                 &Api::create,           A::kToken,  "sandbox.create"},
      {"GET",    "/v1/sandboxes",                                 &Api::list,             A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}",                            &Api::show,             A::kToken,  ""},
      {"DELETE", "/v1/sandboxes/{id}",                            &Api::destroy,          A::kToken,  "sandbox.destroy"},
      {"POST",   "/v1/sandboxes/{id}/exec",                       &Api::exec,             A::kToken,  "sandbox.exec"},
      {"GET",    "/v1/sandboxes/{id}/files",                      &Api::get_file,         A::kToken,  ""},
      {"PUT",    "/v1/sandboxes/{id}/files",                      &Api::put_file,         A::kToken,  "sandbox.put_file"},
      {"POST",   "/v1/sandboxes/{id}/files/edit",                 &Api::files_edit,       A::kToken,  "sandbox.edit_file"},
      {"PUT",    "/v1/sandboxes/{id}/internet",                   &Api::internet,         A::kToken,  "sandbox.internet"},
      {"POST",   "/v1/sandboxes/{id}/ttl",                        &Api::ttl,              A::kToken,  "sandbox.ttl"},
      {"POST",   "/v1/sandboxes/{id}/snapshots",                  &Api::snapshot_create,  A::kToken,  "sandbox.snapshot"},
      {"GET",    "/v1/sandboxes/{id}/snapshots",                  &Api::snapshot_list,    A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/snapshots/{name}/rollback",  &Api::snapshot_rollback, A::kToken, "sandbox.rollback"},
      {"DELETE", "/v1/sandboxes/{id}/snapshots/{name}",           &Api::snapshot_delete,  A::kToken,  "sandbox.delete_snapshot"},
      {"POST",   "/v1/sandboxes/{id}/terminals",                  &Api::terminal_create,  A::kToken,  "terminal.open"},
      {"GET",    "/v1/sandboxes/{id}/terminals",                  &Api::terminal_list,    A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}",            &Api::terminal_show,    A::kToken,  ""},
      {"DELETE", "/v1/sandboxes/{id}/terminals/{tid}",            &Api::terminal_delete,  A::kToken,  "terminal.close"},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/resize",     &Api::terminal_resize,  A::kToken,  "terminal.resize"},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/input",      &Api::terminal_input,   A::kToken,  "terminal.input"},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}/screen",     &Api::terminal_screen,  A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/wait",       &Api::terminal_wait,    A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}/ws",         &Api::terminal_ws,      A::kToken,  "terminal.attach"},
      {"GET",    "/v1/approvals",                                 &Api::approvals_list,   A::kToken,  ""},
      {"GET",    "/v1/approvals/{id}",                            &Api::approval_show,    A::kToken,  ""},
      {"POST",   "/v1/approvals/{id}/approve",                    &Api::approval_approve, A::kToken,  "approval.approve"},
      {"POST",   "/v1/approvals/{id}/deny",                       &Api::approval_deny,    A::kToken,  "approval.deny"},
      // MCP (Streamable HTTP): each tool call is audited on its own as "mcp.<tool>".
      {"POST",   "/mcp",                                          &Api::mcp_post,         A::kToken,  ""},
      {"DELETE", "/mcp",                                          &Api::mcp_delete,       A::kToken,  ""},
  };
  // clang-format on
  return kRoutes;
}

}  // namespace pvs::service
