// The REST API at a glance: every route, its handler, who may call it and what the audit log
// records. docs/api.md documents each; docs/openapi.json is the machine-readable form.
//
// A row names its handler as on<&Class::method>: the method of one small class that receives
// only what it uses (ApprovalRoutes, AuditRoutes, FleetRoutes, E2bRoutes) or, for the routes not
// moved out of it yet, of Api. A new route is a row here plus a method on one handler class
// (and, for a new class, its part<>() below).
#include "http/server.h"

namespace pvs::service {

template <>
Api& Api::part<Api>() {
  return *this;
}
template <>
ApprovalRoutes& Api::part<ApprovalRoutes>() {
  return approval_routes_;
}
template <>
E2bRoutes& Api::part<E2bRoutes>() {
  return e2b_routes_;
}
template <>
AuditRoutes& Api::part<AuditRoutes>() {
  return audit_routes_;
}
template <>
FleetRoutes& Api::part<FleetRoutes>() {
  return fleet_routes_;
}

namespace {

template <typename M>
struct MemberOf;
template <typename C>
struct MemberOf<void (C::*)(RequestContext&)> {
  using type = C;
};

// The row's handler: finds the object of the method's class on the Api and calls it.
template <auto Method>
void on(Api& api, RequestContext& ctx) {
  using Part = typename MemberOf<decltype(Method)>::type;
  (api.part<Part>().*Method)(ctx);
}

}  // namespace

std::span<const Route> Api::routes() {
  using A = Route::Access;
  // clang-format off
  static constexpr Route kRoutes[] = {
      // method   pattern                                          handler                access      audit action
      {"GET",    "/v1/health",                                    on<&Api::health>,           A::kPublic, ""},
      {"GET",    "/v1/openapi.json",                              on<&Api::openapi>,          A::kPublic, ""},
      {"GET",    "/metrics",                                      on<&Api::metrics_text>,     A::kPublic, ""},
      {"GET",    "/v1/pools",                                     on<&FleetRoutes::pools>,    A::kAdmin,  ""},
      {"GET",    "/v1/nodes",                                     on<&FleetRoutes::nodes>,    A::kAdmin,  ""},
      {"POST",   "/v1/nodes/{name}/drain",                        on<&FleetRoutes::drain>,    A::kAdmin,  "node.drain"},
      {"POST",   "/v1/nodes/{name}/undrain",                      on<&FleetRoutes::undrain>,  A::kAdmin,  "node.undrain"},
      {"GET",    "/v1/audit",                                     on<&AuditRoutes::tail>,     A::kAdmin,  ""},
      {"POST",   "/v1/sandboxes",                                 on<&Api::create>,           A::kToken,  "sandbox.create"},
      {"GET",    "/v1/sandboxes",                                 on<&Api::list>,             A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}",                            on<&Api::show>,             A::kToken,  ""},
      {"DELETE", "/v1/sandboxes/{id}",                            on<&Api::destroy>,          A::kToken,  "sandbox.destroy"},
      {"POST",   "/v1/sandboxes/{id}/exec",                       on<&Api::exec>,             A::kToken,  "sandbox.exec"},
      {"GET",    "/v1/sandboxes/{id}/files",                      on<&Api::get_file>,         A::kToken,  ""},
      {"PUT",    "/v1/sandboxes/{id}/files",                      on<&Api::put_file>,         A::kToken,  "sandbox.put_file"},
      {"POST",   "/v1/sandboxes/{id}/files/edit",                 on<&Api::files_edit>,       A::kToken,  "sandbox.edit_file"},
      {"PUT",    "/v1/sandboxes/{id}/internet",                   on<&Api::internet>,         A::kToken,  "sandbox.internet"},
      {"POST",   "/v1/sandboxes/{id}/ttl",                        on<&Api::ttl>,              A::kToken,  "sandbox.ttl"},
      {"POST",   "/v1/sandboxes/{id}/snapshots",                  on<&Api::snapshot_create>,  A::kToken,  "sandbox.snapshot"},
      {"GET",    "/v1/sandboxes/{id}/snapshots",                  on<&Api::snapshot_list>,    A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/snapshots/{name}/rollback",  on<&Api::snapshot_rollback>, A::kToken, "sandbox.rollback"},
      {"DELETE", "/v1/sandboxes/{id}/snapshots/{name}",           on<&Api::snapshot_delete>,  A::kToken,  "sandbox.delete_snapshot"},
      {"POST",   "/v1/sandboxes/{id}/terminals",                  on<&Api::terminal_create>,  A::kToken,  "terminal.open"},
      {"GET",    "/v1/sandboxes/{id}/terminals",                  on<&Api::terminal_list>,    A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}",            on<&Api::terminal_show>,    A::kToken,  ""},
      {"DELETE", "/v1/sandboxes/{id}/terminals/{tid}",            on<&Api::terminal_delete>,  A::kToken,  "terminal.close"},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/resize",     on<&Api::terminal_resize>,  A::kToken,  "terminal.resize"},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/input",      on<&Api::terminal_input>,   A::kToken,  "terminal.input"},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}/screen",     on<&Api::terminal_screen>,  A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/wait",       on<&Api::terminal_wait>,    A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}/ws",         on<&Api::terminal_ws>,      A::kToken,  "terminal.attach"},
      {"GET",    "/v1/approvals",                                 on<&ApprovalRoutes::list>,   A::kToken,  ""},
      {"GET",    "/v1/approvals/{id}",                            on<&ApprovalRoutes::show>,    A::kToken,  ""},
      {"POST",   "/v1/approvals/{id}/approve",                    on<&ApprovalRoutes::approve>, A::kToken,  "approval.approve"},
      {"POST",   "/v1/approvals/{id}/deny",                       on<&ApprovalRoutes::deny>,    A::kToken,  "approval.deny"},
      // MCP (Streamable HTTP): each tool call is audited on its own as "mcp.<tool>".
      {"POST",   "/mcp",                                          on<&Api::mcp_post>,         A::kToken,  ""},
      {"DELETE", "/mcp",                                          on<&Api::mcp_delete>,       A::kToken,  ""},
      // The E2B-compatible API (docs/e2b.md): its own keys (X-API-Key, X-Access-Token), so
      // public here; E2bRoutes authenticates, and audits refusals like the pipeline does.
      {"POST",   "/e2b/v2/sandboxes",                             on<&E2bRoutes::create>,     A::kPublic, "e2b.sandbox.create"},
      {"GET",    "/e2b/v2/sandboxes",                             on<&E2bRoutes::list>,       A::kPublic, ""},
      {"POST",   "/e2b/v2/sandboxes/{id}/connect",                on<&E2bRoutes::connect>,    A::kPublic, "e2b.sandbox.connect"},
      {"POST",   "/e2b/sandboxes/{id}/connect",                   on<&E2bRoutes::connect>,    A::kPublic, "e2b.sandbox.connect"},
      {"GET",    "/e2b/sandboxes/{id}",                           on<&E2bRoutes::show>,       A::kPublic, ""},
      {"DELETE", "/e2b/sandboxes/{id}",                           on<&E2bRoutes::kill>,       A::kPublic, "e2b.sandbox.kill"},
      {"POST",   "/e2b/sandboxes/{id}/timeout",                   on<&E2bRoutes::timeout>,    A::kPublic, "e2b.sandbox.timeout"},
      {"PUT",    "/e2b/sandboxes/{id}/network",                   on<&E2bRoutes::network>,    A::kPublic, "e2b.sandbox.network"},
      {"GET",    "/e2b/sandboxes/{id}/metrics",                   on<&E2bRoutes::metrics>,    A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/pause",                     on<&E2bRoutes::unsupported>, A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/resume",                    on<&E2bRoutes::unsupported>, A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/fork",                      on<&E2bRoutes::unsupported>, A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/snapshots",                 on<&E2bRoutes::unsupported>, A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/refreshes",                 on<&E2bRoutes::unsupported>, A::kPublic, ""},
      {"POST",   "/e2b/envd/{service}/{method}",                  on<&E2bRoutes::rpc>,        A::kPublic, ""},
      {"GET",    "/e2b/envd/files",                               on<&E2bRoutes::files_get>,  A::kPublic, ""},
      {"POST",   "/e2b/envd/files",                               on<&E2bRoutes::files_post>, A::kPublic, "e2b.files.write"},
      {"GET",    "/e2b/envd/health",                              on<&E2bRoutes::health>,     A::kPublic, ""},
  };
  // clang-format on
  return kRoutes;
}

}  // namespace pvs::service
