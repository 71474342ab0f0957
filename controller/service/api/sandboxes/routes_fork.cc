// Templates from a sandbox and forks (docs/api.md "Templates from a sandbox and forks"):
// POST /v1/sandboxes/{id}/capture {"name"} makes a template of the sandbox's files, owned by
// the caller (201, the template as GET /v1/templates shows it); POST /v1/sandboxes/{id}/fork
// {"count","ttl_seconds"} makes `count` sandboxes of its files at once, all or none (201,
// {"sandboxes":[...]}), judged by the policy as creates of the sandbox's shape.
#include "api/sandboxes/sandbox_routes.h"
#include "api/templates/template_routes.h"
#include "http/json.h"
#include "http/requests.h"
#include "policy/canonical.h"
#include "policy/egress_access.h"

namespace pvs::service {

CreateRequest fork_request(const SandboxInfo& source, int ttl_seconds) {
  CreateRequest r;
  r.cpus = source.cpus;
  r.memory_mb = source.memory_mb;
  r.disk_gb = source.disk_gb;
  r.ttl_seconds = ttl_seconds;
  r.pause_on_expiry = source.on_expiry.pause;
  r.auto_resume = source.on_expiry.auto_resume;
  for (const auto& [k, v] : source.labels)  // the controller's own are its to write
    if (k.rfind(kReservedLabelPrefix, 0) != 0) r.labels[k] = v;
  return r;
}

PolicyRequest fork_policy_request(const CreateRequest& r, const Egress& egress,
                                  const std::string& source, int count) {
  PolicyRequest asked;
  asked.action = PolicyAction::kSandboxCreate;
  asked.cpus = r.cpus;
  asked.memory_mb = r.memory_mb;
  asked.disk_gb = r.disk_gb;
  set_policy_egress(asked, egress);
  asked.canonical = canonical_fork(r, egress, source, count);
  return asked;
}

void SandboxRoutes::capture(RequestContext& ctx) {
  auto name = parse_capture(d_.replies.json_body(ctx));
  if (!name) throw name.error();
  JsonWriter p;
  ctx.params_json = p.begin_object().key("name").value(*name).end_object().take();
  auto sandbox = d_.sandboxes.find(ctx);
  auto made = d_.sandboxes.capture_for(*ctx.principal, *sandbox, *name);
  JsonWriter w;
  write_template(w, made);
  ctx.response->set("Location", "/v1/templates/" + made.name);
  d_.replies.send_json(ctx, 201, w.take());
}

void SandboxRoutes::fork(RequestContext& ctx) {
  auto req = parse_fork(d_.replies.json_body(ctx), d_.config);
  if (!req) throw req.error();
  JsonWriter p;
  p.begin_object().key("count").value(req->count).key("ttl_seconds").value(req->ttl_seconds);
  ctx.params_json = p.end_object().take();
  auto sandbox = d_.sandboxes.find(ctx);
  auto info = sandbox->info();
  CreateRequest create = fork_request(info, req->ttl_seconds);
  if (!d_.gate.admit(ctx, fork_policy_request(create, info.egress, info.id, req->count))) return;
  auto forks = d_.sandboxes.fork_for(*ctx.principal, *sandbox, req->count, create, info.egress);
  JsonWriter w;
  w.begin_object().key("sandboxes").begin_array();
  for (const auto& f : forks) w.raw(sandbox_json(f->info()));
  d_.replies.send_json(ctx, 201, w.end_array().end_object().take());
}

}  // namespace pvs::service
