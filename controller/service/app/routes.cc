// The REST API at a glance: every route, its handler, who may call it and what the audit log
// records. docs/api.md documents each; docs/openapi.json is the machine-readable form.
//
// A row names its handler as on<&Class::method>: the method of one small class that receives
// only what it uses, in the room of its resource: SystemRoutes and FleetRoutes (api/fleet),
// TemplateRoutes (api/templates), VolumeRoutes (api/volumes), SandboxRoutes (api/sandboxes),
// FileRoutes (api/files), PortRoutes (api/ports), TerminalRoutes (api/terminals), AuditRoutes
// (api/audit), McpRoutes (api/mcp), ApprovalRoutes (policy/), E2bRoutes (e2b/). The Api builds them
// (app/api.h) and is the one shared path before them: authentication, per-token limits, then the
// handler, which asks the policy gate (admit) itself. A new route is a row here plus a method on
// one handler class (and, for a new class, its member in part()).
#include <tuple>

#include "app/api.h"

namespace pvs::service {

// The handler object of a row's class: the one member of that type.
template <class Part>
Part& Api::part() {
  return std::get<Part&>(std::tie(system_routes_, fleet_routes_, template_routes_, volume_routes_,
                                  audit_routes_, sandbox_routes_, file_routes_, port_routes_,
                                  terminal_routes_, approval_routes_, mcp_routes_, e2b_routes_));
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

using A = Route::Access;

// clang-format off
constexpr Route kRoutes[] = {
      // method   pattern                                         handler                                access      audit action
      {"GET",    "/v1/health",                                   on<&SystemRoutes::health>,             A::kPublic, ""},
      {"GET",    "/v1/openapi.json",                             on<&SystemRoutes::openapi>,            A::kPublic, ""},
      {"GET",    "/metrics",                                     on<&SystemRoutes::metrics_text>,       A::kPublic, ""},
      {"GET",    "/v1/pools",                                    on<&FleetRoutes::pools>,               A::kAdmin,  ""},
      {"GET",    "/v1/nodes",                                    on<&FleetRoutes::nodes>,               A::kAdmin,  ""},
      {"POST",   "/v1/nodes/{name}/drain",                       on<&FleetRoutes::drain>,               A::kAdmin,  "node.drain"},
      {"POST",   "/v1/nodes/{name}/undrain",                     on<&FleetRoutes::undrain>,             A::kAdmin,  "node.undrain"},
      {"POST",   "/v1/templates",                                on<&TemplateRoutes::build>,            A::kAdmin,  "template.build"},
      {"GET",    "/v1/templates",                                on<&TemplateRoutes::list>,             A::kToken,  ""},
      {"GET",    "/v1/templates/{name}",                         on<&TemplateRoutes::show>,             A::kToken,  ""},
      {"DELETE", "/v1/templates/{name}",                         on<&TemplateRoutes::remove>,           A::kToken,  "template.delete"},
      {"POST",   "/v1/volumes",                                  on<&VolumeRoutes::create>,             A::kToken,  "volume.create"},
      {"GET",    "/v1/volumes",                                  on<&VolumeRoutes::list>,               A::kToken,  ""},
      {"GET",    "/v1/volumes/{id}",                             on<&VolumeRoutes::show>,               A::kToken,  ""},
      {"DELETE", "/v1/volumes/{id}",                             on<&VolumeRoutes::remove>,             A::kToken,  "volume.delete"},
      {"POST",   "/v1/volumes/{id}/resize",                      on<&VolumeRoutes::resize>,             A::kToken,  "volume.resize"},
      {"GET",    "/v1/audit",                                    on<&AuditRoutes::tail>,                A::kAdmin,  ""},
      {"POST",   "/v1/sandboxes",                                on<&SandboxRoutes::create>,            A::kToken,  "sandbox.create"},
      {"GET",    "/v1/sandboxes",                                on<&SandboxRoutes::list>,              A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}",                           on<&SandboxRoutes::show>,              A::kToken,  ""},
      {"DELETE", "/v1/sandboxes/{id}",                           on<&SandboxRoutes::destroy>,           A::kToken,  "sandbox.destroy"},
      {"POST",   "/v1/sandboxes/{id}/exec",                      on<&SandboxRoutes::exec>,              A::kToken,  "sandbox.exec"},
      {"GET",    "/v1/sandboxes/{id}/files",                     on<&FileRoutes::download>,             A::kToken,  ""},
      {"PUT",    "/v1/sandboxes/{id}/files",                     on<&FileRoutes::upload>,               A::kToken,  "sandbox.put_file"},
      {"POST",   "/v1/sandboxes/{id}/files/edit",                on<&FileRoutes::edit>,                 A::kToken,  "sandbox.edit_file"},
      // A service in the sandbox (HEAD is the GET row): one request proxied, audited at its end.
      {"GET",    "/v1/sandboxes/{id}/ports",                     on<&PortRoutes::list>,                 A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/ports/{port}/{path...}",    on<&PortRoutes::proxy>,                A::kToken,  "sandbox.port"},
      {"POST",   "/v1/sandboxes/{id}/ports/{port}/{path...}",    on<&PortRoutes::proxy>,                A::kToken,  "sandbox.port"},
      {"PUT",    "/v1/sandboxes/{id}/ports/{port}/{path...}",    on<&PortRoutes::proxy>,                A::kToken,  "sandbox.port"},
      {"PATCH",  "/v1/sandboxes/{id}/ports/{port}/{path...}",    on<&PortRoutes::proxy>,                A::kToken,  "sandbox.port"},
      {"DELETE", "/v1/sandboxes/{id}/ports/{port}/{path...}",    on<&PortRoutes::proxy>,                A::kToken,  "sandbox.port"},
      {"OPTIONS","/v1/sandboxes/{id}/ports/{port}/{path...}",    on<&PortRoutes::proxy>,                A::kToken,  "sandbox.port"},
      {"POST",   "/v1/sandboxes/{id}/previews",                  on<&PortRoutes::make_preview>,         A::kToken,  "sandbox.preview"},
      {"GET",    "/v1/previews/{token}/{path...}",               on<&PortRoutes::preview>,              A::kPublic, "sandbox.port"},
      {"POST",   "/v1/previews/{token}/{path...}",               on<&PortRoutes::preview>,              A::kPublic, "sandbox.port"},
      {"PUT",    "/v1/previews/{token}/{path...}",               on<&PortRoutes::preview>,              A::kPublic, "sandbox.port"},
      {"PATCH",  "/v1/previews/{token}/{path...}",               on<&PortRoutes::preview>,              A::kPublic, "sandbox.port"},
      {"DELETE", "/v1/previews/{token}/{path...}",               on<&PortRoutes::preview>,              A::kPublic, "sandbox.port"},
      {"OPTIONS","/v1/previews/{token}/{path...}",               on<&PortRoutes::preview>,              A::kPublic, "sandbox.port"},
      {"PUT",    "/v1/sandboxes/{id}/internet",                  on<&SandboxRoutes::internet>,          A::kToken,  "sandbox.internet"},
      {"GET",    "/v1/sandboxes/{id}/egress/log",                on<&SandboxRoutes::egress_log>,        A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/usage",                     on<&SandboxRoutes::usage>,             A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/ttl",                       on<&SandboxRoutes::ttl>,               A::kToken,  "sandbox.ttl"},
      {"POST",   "/v1/sandboxes/{id}/pause",                     on<&SandboxRoutes::pause>,             A::kToken,  "sandbox.pause"},
      {"POST",   "/v1/sandboxes/{id}/resume",                    on<&SandboxRoutes::resume>,            A::kToken,  "sandbox.resume"},
      {"POST",   "/v1/sandboxes/{id}/capture",                   on<&SandboxRoutes::capture>,           A::kToken,  "sandbox.capture"},
      {"POST",   "/v1/sandboxes/{id}/fork",                      on<&SandboxRoutes::fork>,              A::kToken,  "sandbox.fork"},
      {"POST",   "/v1/sandboxes/{id}/snapshots",                 on<&SandboxRoutes::snapshot_create>,   A::kToken,  "sandbox.snapshot"},
      {"GET",    "/v1/sandboxes/{id}/snapshots",                 on<&SandboxRoutes::snapshot_list>,     A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/snapshots/{name}/rollback", on<&SandboxRoutes::snapshot_rollback>, A::kToken,  "sandbox.rollback"},
      {"DELETE", "/v1/sandboxes/{id}/snapshots/{name}",          on<&SandboxRoutes::snapshot_delete>,   A::kToken,  "sandbox.delete_snapshot"},
      {"POST",   "/v1/sandboxes/{id}/terminals",                 on<&TerminalRoutes::create>,           A::kToken,  "terminal.open"},
      {"GET",    "/v1/sandboxes/{id}/terminals",                 on<&TerminalRoutes::list>,             A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}",           on<&TerminalRoutes::show>,             A::kToken,  ""},
      {"DELETE", "/v1/sandboxes/{id}/terminals/{tid}",           on<&TerminalRoutes::close>,            A::kToken,  "terminal.close"},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/resize",    on<&TerminalRoutes::resize>,           A::kToken,  "terminal.resize"},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/input",     on<&TerminalRoutes::input>,            A::kToken,  "terminal.input"},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}/screen",    on<&TerminalRoutes::screen>,           A::kToken,  ""},
      {"POST",   "/v1/sandboxes/{id}/terminals/{tid}/wait",      on<&TerminalRoutes::wait>,             A::kToken,  ""},
      {"GET",    "/v1/sandboxes/{id}/terminals/{tid}/ws",        on<&TerminalRoutes::websocket>,        A::kToken,  "terminal.attach"},
      {"GET",    "/v1/approvals",                                on<&ApprovalRoutes::list>,             A::kToken,  ""},
      {"GET",    "/v1/approvals/{id}",                           on<&ApprovalRoutes::show>,             A::kToken,  ""},
      {"POST",   "/v1/approvals/{id}/approve",                   on<&ApprovalRoutes::approve>,          A::kToken,  "approval.approve"},
      {"POST",   "/v1/approvals/{id}/deny",                      on<&ApprovalRoutes::deny>,             A::kToken,  "approval.deny"},
      // MCP (Streamable HTTP): each tool call is audited on its own as "mcp.<tool>".
      {"POST",   "/mcp",                                         on<&McpRoutes::post>,                  A::kToken,  ""},
      {"DELETE", "/mcp",                                         on<&McpRoutes::remove>,                A::kToken,  ""},
      // The E2B-compatible API (docs/e2b.md): its own keys (X-API-Key, X-Access-Token), so
      // public here; E2bRoutes authenticates, and audits refusals like the pipeline does.
      {"POST",   "/e2b/v2/sandboxes",                            on<&E2bRoutes::create>,                A::kPublic, "e2b.sandbox.create"},
      {"GET",    "/e2b/v2/sandboxes",                            on<&E2bRoutes::list>,                  A::kPublic, ""},
      {"POST",   "/e2b/v2/sandboxes/{id}/connect",               on<&E2bRoutes::connect>,               A::kPublic, "e2b.sandbox.connect"},
      {"POST",   "/e2b/sandboxes/{id}/connect",                  on<&E2bRoutes::connect>,               A::kPublic, "e2b.sandbox.connect"},
      {"GET",    "/e2b/sandboxes/{id}",                          on<&E2bRoutes::show>,                  A::kPublic, ""},
      {"DELETE", "/e2b/sandboxes/{id}",                          on<&E2bRoutes::kill>,                  A::kPublic, "e2b.sandbox.kill"},
      {"POST",   "/e2b/sandboxes/{id}/timeout",                  on<&E2bRoutes::timeout>,               A::kPublic, "e2b.sandbox.timeout"},
      {"PUT",    "/e2b/sandboxes/{id}/network",                  on<&E2bRoutes::network>,               A::kPublic, "e2b.sandbox.network"},
      {"GET",    "/e2b/sandboxes/{id}/metrics",                  on<&E2bRoutes::metrics>,               A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/pause",                    on<&E2bRoutes::pause>,                 A::kPublic, "e2b.sandbox.pause"},
      {"POST",   "/e2b/sandboxes/{id}/resume",                   on<&E2bRoutes::unsupported>,           A::kPublic, ""},
      {"POST",   "/e2b/sandboxes/{id}/fork",                     on<&E2bRoutes::fork>,                  A::kPublic, "e2b.sandbox.fork"},
      {"POST",   "/e2b/sandboxes/{id}/snapshots",                on<&E2bRoutes::snapshot_create>,       A::kPublic, "e2b.sandbox.snapshot"},
      {"GET",    "/e2b/snapshots",                               on<&E2bRoutes::snapshot_list>,         A::kPublic, ""},
      {"DELETE", "/e2b/templates/{id}",                          on<&E2bRoutes::template_delete>,       A::kPublic, "e2b.template.delete"},
      {"POST",   "/e2b/volumes",                                 on<&E2bRoutes::volume_create>,         A::kPublic, "e2b.volume.create"},
      {"GET",    "/e2b/volumes",                                 on<&E2bRoutes::volume_list>,           A::kPublic, ""},
      {"GET",    "/e2b/volumes/{id}",                            on<&E2bRoutes::volume_show>,           A::kPublic, ""},
      {"DELETE", "/e2b/volumes/{id}",                            on<&E2bRoutes::volume_delete>,         A::kPublic, "e2b.volume.delete"},
      {"GET",    "/e2b/volumecontent/{id}/{path...}",            on<&E2bRoutes::volume_content>,        A::kPublic, ""},
      {"POST",   "/e2b/volumecontent/{id}/{path...}",            on<&E2bRoutes::volume_content>,        A::kPublic, "e2b.volume.content"},
      {"PUT",    "/e2b/volumecontent/{id}/{path...}",            on<&E2bRoutes::volume_content>,        A::kPublic, "e2b.volume.content"},
      {"PATCH",  "/e2b/volumecontent/{id}/{path...}",            on<&E2bRoutes::volume_content>,        A::kPublic, "e2b.volume.content"},
      {"DELETE", "/e2b/volumecontent/{id}/{path...}",            on<&E2bRoutes::volume_content>,        A::kPublic, "e2b.volume.content"},
      {"POST",   "/e2b/sandboxes/{id}/refreshes",                on<&E2bRoutes::unsupported>,           A::kPublic, ""},
      {"POST",   "/e2b/envd/{service}/{method}",                 on<&E2bRoutes::rpc>,                   A::kPublic, ""},
      {"GET",    "/e2b/envd/files",                              on<&E2bRoutes::files_get>,             A::kPublic, ""},
      {"POST",   "/e2b/envd/files",                              on<&E2bRoutes::files_post>,            A::kPublic, "e2b.files.write"},
      {"GET",    "/e2b/envd/health",                             on<&E2bRoutes::health>,                A::kPublic, ""},
      // E2B's signed file URLs as the SDK builds them under E2B_SANDBOX_URL (on its origin).
      {"GET",    "/files",                                       on<&E2bRoutes::files_get>,             A::kPublic, ""},
      {"POST",   "/files",                                       on<&E2bRoutes::files_post>,            A::kPublic, "e2b.files.write"},
      // E2B's template builds (admin tokens' keys; the upload link's token is its own key).
      {"POST",   "/e2b/v3/templates",                            on<&E2bRoutes::template_request>,      A::kPublic, ""},
      {"GET",    "/e2b/templates/{id}/files/{hash}",             on<&E2bRoutes::template_files>,        A::kPublic, ""},
      {"PUT",    "/e2b/template-uploads/{token}",                on<&E2bRoutes::template_upload>,       A::kPublic, ""},
      {"POST",   "/e2b/v2/templates/{id}/builds/{bid}",          on<&E2bRoutes::template_start>,        A::kPublic, "e2b.template.build"},
      {"GET",    "/e2b/templates/{id}/builds/{bid}/status",      on<&E2bRoutes::template_status>,       A::kPublic, ""},
      {"GET",    "/e2b/templates/aliases/{alias}",               on<&E2bRoutes::template_alias>,        A::kPublic, ""},
};
// clang-format on

}  // namespace

std::span<const Route> Api::routes() {
  return kRoutes;
}

}  // namespace pvs::service
