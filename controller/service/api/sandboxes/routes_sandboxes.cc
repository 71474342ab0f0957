// Sandboxes: create, list, show, destroy, internet (on, off or an allowlist) and its egress
// log, usage over time, TTL.
#include "api/sandboxes/egress_log_view.h"
#include "api/sandboxes/sandbox_routes.h"
#include "api/sandboxes/usage_view.h"
#include "http/json.h"
#include "http/requests.h"
#include "policy/canonical.h"
#include "policy/egress_access.h"

namespace pvs::service {

std::string sandbox_json(const SandboxInfo& s) {
  JsonWriter w;
  w.begin_object();
  w.key("id").value(s.id);
  w.key("vmid").value(s.vmid);
  w.key("node").value(s.node);
  w.key("hostname").value(s.hostname);
  w.key("address");
  if (s.address) {
    w.value(s.address->to_string());
  } else {
    w.null();
  }
  w.key("state").value(std::string(to_string(s.phase)));
  w.key("status").value(s.status);
  w.key("internet").raw(egress_json(s.egress));
  w.key("egress").value(std::string(to_string(s.egress.mode)));
  w.key("cpus").value(s.cpus).key("memory_mb").value(s.memory_mb).key("disk_gb").value(s.disk_gb);
  w.key("created_at").value(iso_time(s.created_at));
  w.key("expires_at");
  if (s.expires_at > 0) {
    w.value(iso_time(s.expires_at));
  } else {
    w.null();
  }
  w.key("on_expiry").value(s.on_expiry.pause ? "pause" : "destroy");
  w.key("auto_resume").value(s.on_expiry.auto_resume);
  w.key("labels").value(s.labels);
  w.key("owner").value(s.owner);
  if (!s.host_key.empty()) w.key("host_key").value(s.host_key);
  w.key("volumes").begin_array();
  for (const auto& v : s.volumes) {
    w.begin_object().key("id").value(v.volume).key("path").value(v.path);
    w.key("read_only").value(v.read_only).end_object();
  }
  w.end_array();
  w.end_object();
  return w.take();
}

void SandboxRoutes::create(RequestContext& ctx) {
  auto req = parse_create(d_.replies.json_body(ctx), d_.config);
  if (!req) throw req.error();
  auto egress = resolve_egress(req->internet, d_.config, ctx.principal->name);
  if (!egress) throw egress.error();
  {
    JsonWriter p;
    p.begin_object().key("cpus").value(req->cpus).key("memory_mb").value(req->memory_mb);
    p.key("disk_gb").value(req->disk_gb).key("internet").raw(egress_request_json(req->internet));
    p.key("ttl_seconds").value(req->ttl_seconds).key("labels").value(req->labels);
    if (req->pause_on_expiry)
      p.key("on_expiry").value("pause").key("auto_resume").value(req->auto_resume);
    p.key("hostname").value(req->hostname).key("profile").value(req->profile);
    if (!req->node.empty()) p.key("node").value(req->node);
    if (!req->node_selector.empty()) p.key("node_selector").value(req->node_selector);
    if (!req->volumes.empty()) {
      p.key("volumes").begin_array();
      for (const auto& v : req->volumes)
        p.begin_object().key("volume").value(v.volume).key("path").value(v.path).end_object();
      p.end_array();
    }
    p.end_object();
    ctx.params_json = p.take();
  }
  PolicyRequest asked;
  asked.action = PolicyAction::kSandboxCreate;
  asked.cpus = req->cpus;
  asked.memory_mb = req->memory_mb;
  asked.disk_gb = req->disk_gb;
  set_policy_egress(asked, *egress);
  asked.canonical = canonical_create(*req, *egress);
  if (!d_.gate.admit(ctx, asked)) return;
  auto sandbox = d_.sandboxes.create_for(*ctx.principal, *req, *egress);
  SandboxInfo info = sandbox->info();
  ctx.sandbox = info.id;
  ctx.response->set("Location", "/v1/sandboxes/" + info.id);
  d_.replies.send_json(ctx, 201, sandbox_json(info));
}

void SandboxRoutes::list(RequestContext& ctx) {
  std::vector<std::string> labels;
  auto range = ctx.query.equal_range("label");
  for (auto it = range.first; it != range.second; ++it) labels.push_back(it->second);
  for (const auto& [k, v] : ctx.query) {
    if (k != "label") throw bad_request(k.substr(0, 64) + ": unknown query parameter");
  }
  auto selector = parse_selector(labels);
  if (!selector) throw selector.error();
  JsonWriter w;
  w.begin_object().key("sandboxes").begin_array();
  for (const auto& info : d_.sandboxes.list_for(*ctx.principal, *selector))
    w.raw(sandbox_json(info));
  w.end_array().end_object();
  d_.replies.send_json(ctx, 200, w.take());
}

void SandboxRoutes::show(RequestContext& ctx) {
  auto sandbox = d_.sandboxes.find(ctx);
  d_.replies.send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void SandboxRoutes::destroy(RequestContext& ctx) {
  auto sandbox = d_.sandboxes.find(ctx);
  d_.forget(sandbox->id());  // its terminals, its E2B session and processes (docs/e2b.md)
  if (auto st = sandbox->destroy(); !st) throw from_error(st.error());
  d_.replies.send_empty(ctx, 204);
}

void SandboxRoutes::internet(RequestContext& ctx) {
  auto req = parse_internet(d_.replies.json_body(ctx));
  if (!req) throw req.error();
  ctx.params_json = "{\"internet\":" + egress_request_json(*req) + "}";
  auto sandbox = d_.sandboxes.find(ctx);
  auto egress = resolve_egress(*req, d_.config, ctx.principal->name);
  if (!egress) throw egress.error();
  PolicyRequest asked = internet_request(egress_log_or_empty(*sandbox), *egress);
  if (!d_.gate.admit(ctx, asked)) return;
  if (auto st = sandbox->set_egress(*egress); !st) throw from_error(st.error());
  d_.replies.send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void SandboxRoutes::egress_log(RequestContext& ctx) {
  auto filter = parse_egress_log_filter(ctx.query_value("since"), ctx.query_value("limit"));
  if (!filter) throw filter.error();
  auto sandbox = d_.sandboxes.find(ctx);
  auto log = sandbox->egress_log();
  if (!log) throw from_error(log.error());
  d_.replies.send_json(ctx, 200, egress_log_json(*log, *filter));
}

void SandboxRoutes::usage(RequestContext& ctx) {
  auto window = parse_usage_window(ctx.query_value("since"), ctx.query_value("until"));
  if (!window) throw window.error();
  auto sandbox = d_.sandboxes.find(ctx);
  auto samples = sandbox->usage(window->since, window->until);
  if (!samples) throw from_error(samples.error());
  d_.replies.send_json(ctx, 200, usage_json(*samples));
}

void SandboxRoutes::ttl(RequestContext& ctx) {
  auto seconds = parse_ttl(d_.replies.json_body(ctx), d_.config);
  if (!seconds) throw seconds.error();
  ctx.params_json = "{\"ttl_seconds\":" + std::to_string(*seconds) + "}";
  auto sandbox = d_.sandboxes.find(ctx);
  if (auto st = sandbox->extend_ttl(std::chrono::seconds(*seconds)); !st) {
    throw from_error(st.error());
  }
  d_.replies.send_json(ctx, 200, sandbox_json(sandbox->info()));
}

}  // namespace pvs::service
