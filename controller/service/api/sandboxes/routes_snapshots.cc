// Snapshots of a sandbox: take, list, roll back, delete.
#include "http/json.h"
#include "http/requests.h"
#include "http/server.h"

namespace pvs::service {

void Api::snapshot_create(RequestContext& ctx) {
  auto req = parse_snapshot(json_body(ctx));
  if (!req) throw req.error();
  JsonWriter p;
  p.begin_object().key("name").value(req->name).key("description").value(req->description);
  p.end_object();
  ctx.params_json = p.str();
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->snapshot(req->name, req->description); !st) {
    throw from_error(st.error());
  }
  send_json(ctx, 201, p.take());
}

void Api::snapshot_list(RequestContext& ctx) {
  auto sandbox = find_sandbox(ctx);
  auto snaps = sandbox->snapshots();
  if (!snaps) throw from_error(snaps.error());
  JsonWriter w;
  w.begin_object().key("snapshots").begin_array();
  for (const auto& s : *snaps) {
    w.begin_object().key("name").value(s.name).key("description").value(s.description);
    w.key("created_at").value(iso_time(s.created_at)).end_object();
  }
  w.end_array().end_object();
  send_json(ctx, 200, w.take());
}

// The {name} of a snapshot route, validated and recorded for the audit log. A missing snapshot
// is the Manager's kNotFound (404).
static const std::string& snapshot_name(RequestContext& ctx) {
  const std::string& name = ctx.params.at("name");
  if (!is_snapshot_name(name)) throw bad_request("name: not a snapshot name");
  ctx.params_json = "{\"name\":\"" + name + "\"}";
  return name;
}

void Api::snapshot_rollback(RequestContext& ctx) {
  const std::string& name = snapshot_name(ctx);
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->rollback(name); !st) throw from_error(st.error());
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::snapshot_delete(RequestContext& ctx) {
  const std::string& name = snapshot_name(ctx);
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->delete_snapshot(name); !st) throw from_error(st.error());
  send_empty(ctx, 204);
}

}  // namespace pvs::service
