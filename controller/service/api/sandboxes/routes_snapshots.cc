// Snapshots of a sandbox: take, list, roll back, delete.
#include "api/sandboxes/sandbox_routes.h"
#include "http/json.h"
#include "http/requests.h"

namespace pvs::service {

void SandboxRoutes::snapshot_create(RequestContext& ctx) {
  auto req = parse_snapshot(d_.replies.json_body(ctx));
  if (!req) throw req.error();
  JsonWriter p;
  p.begin_object().key("name").value(req->name).key("description").value(req->description);
  p.end_object();
  ctx.params_json = p.str();
  auto sandbox = d_.sandboxes.find(ctx);
  if (auto st = sandbox->snapshot(req->name, req->description); !st) {
    throw from_error(st.error());
  }
  d_.replies.send_json(ctx, 201, p.take());
}

void SandboxRoutes::snapshot_list(RequestContext& ctx) {
  auto sandbox = d_.sandboxes.find(ctx);
  auto snaps = sandbox->snapshots();
  if (!snaps) throw from_error(snaps.error());
  JsonWriter w;
  w.begin_object().key("snapshots").begin_array();
  for (const auto& s : *snaps) {
    w.begin_object().key("name").value(s.name).key("description").value(s.description);
    w.key("created_at").value(iso_time(s.created_at)).end_object();
  }
  w.end_array().end_object();
  d_.replies.send_json(ctx, 200, w.take());
}

// The {name} of a snapshot route, validated and recorded for the audit log. A missing snapshot
// is the Manager's kNotFound (404).
static const std::string& snapshot_name(RequestContext& ctx) {
  const std::string& name = ctx.params.at("name");
  if (!is_snapshot_name(name)) throw bad_request("name: not a snapshot name");
  ctx.params_json = "{\"name\":\"" + name + "\"}";
  return name;
}

void SandboxRoutes::snapshot_rollback(RequestContext& ctx) {
  const std::string& name = snapshot_name(ctx);
  auto sandbox = d_.sandboxes.find(ctx);
  if (auto st = sandbox->rollback(name); !st) throw from_error(st.error());
  d_.replies.send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void SandboxRoutes::snapshot_delete(RequestContext& ctx) {
  const std::string& name = snapshot_name(ctx);
  auto sandbox = d_.sandboxes.find(ctx);
  if (auto st = sandbox->delete_snapshot(name); !st) throw from_error(st.error());
  d_.replies.send_empty(ctx, 204);
}

}  // namespace pvs::service
