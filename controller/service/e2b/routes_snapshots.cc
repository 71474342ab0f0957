// E2B's snapshots and fork (docs/e2b.md), on templates of a sandbox's files (Manager::
// capture_template and Manager::fork, docs/templates.md "Templates from a sandbox"):
// POST /sandboxes/{id}/snapshots makes one, owned by the key's token, whose name is the
// snapshotID Sandbox.create takes as its template; GET /snapshots lists the token's own;
// DELETE /templates/{id} deletes one (409 while a sandbox uses it); POST /sandboxes/{id}/fork
// makes `count` sandboxes of its files at once, judged by the policy as creates of its shape.
#include "api/sandboxes/sandbox_routes.h"
#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "http/json.h"

namespace pvs::service {
namespace {

std::string snapshot_json(const CustomTemplate& t) {
  JsonWriter w;
  w.begin_object().key("snapshotID").value(t.name).key("names").begin_array().value(t.name);
  return w.end_array().end_object().take();
}

}  // namespace

void E2bRoutes::snapshot_create(RequestContext& ctx) {
  control(ctx, [&] {
    auto name = e2b::parse_snapshot(d_.replies.json_body(ctx));
    if (!name) throw name.error();
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    JsonWriter p;
    ctx.params_json = p.begin_object().key("name").value(*name).end_object().take();
    auto made = d_.capture_for(*ctx.principal, *sandbox, *name);
    d_.replies.send_json(ctx, 201, snapshot_json(made));
  });
}

void E2bRoutes::snapshot_list(RequestContext& ctx) {
  control(ctx, [&] {
    auto q = e2b::parse_snapshot_query(ctx.query);
    if (!q) throw q.error();
    std::vector<CustomTemplate> mine;
    for (auto& t : d_.templates_for(*ctx.principal))
      if (t.owner == ctx.principal->name && !t.source.empty() && !t.fork_base &&
          (q->sandbox_id.empty() || t.source == q->sandbox_id) &&
          (q->name.empty() || t.name == q->name))
        mine.push_back(std::move(t));
    JsonWriter w;
    w.begin_array();
    for (std::size_t i = q->offset; i < mine.size() && i < q->offset + q->limit; ++i)
      w.raw(snapshot_json(mine[i]));
    if (q->offset + q->limit < mine.size())
      ctx.response->set("X-Next-Token", e2b::next_token(q->offset + q->limit));
    d_.replies.send_json(ctx, 200, w.end_array().take());
  });
}

void E2bRoutes::template_delete(RequestContext& ctx) {
  control(ctx, [&] {
    const std::string& id = ctx.params.at("id");
    if (!valid_template_name(id)) throw not_found("no template " + id.substr(0, 64));
    ctx.params_json = "{\"template\":\"" + id + "\"}";
    d_.delete_template_for(*ctx.principal, id);
    d_.replies.send_empty(ctx, 204);
  });
}

void E2bRoutes::fork(RequestContext& ctx) {
  control(ctx, [&] {
    auto req = e2b::parse_fork(d_.replies.json_body(ctx), d_.config.manager.max_fork, max_ttl());
    if (!req) throw req.error();
    JsonWriter p;
    p.begin_object().key("count").value(req->count).key("timeout").value(req->ttl_seconds);
    ctx.params_json = p.end_object().take();
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    auto info = sandbox->info();
    CreateRequest create = fork_request(info, req->ttl_seconds);
    PolicyRequest asked = fork_policy_request(create, info.egress, info.id, req->count);
    ctx.policy_json = admit_decided(*ctx.principal, info.id, asked,
                                    d_.config.policy.decide(ctx.principal->name, asked));
    auto source = sessions_.ensure(sandbox);
    auto forks = d_.fork_for(*ctx.principal, *sandbox, req->count, create, info.egress);
    JsonWriter w;
    w.begin_array();
    for (const auto& f : forks) {
      auto fi = f->info();
      auto base = fi.labels.find(std::string(kTemplateNameLabel));
      auto session = sessions_.ensure(
          f, base == fi.labels.end() ? source->template_id : base->second, source->env_vars);
      w.begin_object().key("sandbox").raw(
          e2b::sandbox_reply(view_of(fi, *session, d_.config.e2b_domain)));
      w.end_object();
    }
    d_.replies.send_json(ctx, 201, w.end_array().take());
  });
}

}  // namespace pvs::service
