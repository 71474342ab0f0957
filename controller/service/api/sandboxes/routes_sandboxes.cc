// Sandboxes: create, list, show, destroy, internet (on, off or an allowlist), TTL.
#include "http/json.h"
#include "http/requests.h"
#include "http/server.h"
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
  w.key("labels").value(s.labels);
  w.key("owner").value(s.owner);
  if (!s.host_key.empty()) w.key("host_key").value(s.host_key);
  w.end_object();
  return w.take();
}

std::shared_ptr<Sandbox> Api::sandbox_for(const Principal& principal, const std::string& id) {
  if (!is_sandbox_id(id))
    throw bad_request("not a sandbox id (sb- and 12 hex digits): " + id.substr(0, 64));
  auto manager = require_manager();
  auto sandbox = manager->attach(id);
  if (!sandbox) {
    if (sandbox.error().code == ErrorCode::kNotFound) throw not_found("no sandbox " + id);
    throw from_error(sandbox.error());
  }
  if (!principal.admin && (*sandbox)->info().owner != principal.name) {
    throw not_found("no sandbox " + id);  // others' sandboxes are invisible
  }
  return *sandbox;
}

void Api::create(RequestContext& ctx) {
  auto req = parse_create(json_body(ctx), config_);
  if (!req) throw req.error();
  auto egress = resolve_egress(req->internet, config_, ctx.principal->name);
  if (!egress) throw egress.error();
  {
    JsonWriter p;
    p.begin_object().key("cpus").value(req->cpus).key("memory_mb").value(req->memory_mb);
    p.key("disk_gb").value(req->disk_gb).key("internet").raw(egress_request_json(req->internet));
    p.key("ttl_seconds").value(req->ttl_seconds).key("labels").value(req->labels);
    p.key("hostname").value(req->hostname).key("profile").value(req->profile);
    if (!req->node.empty()) p.key("node").value(req->node);
    if (!req->node_selector.empty()) p.key("node_selector").value(req->node_selector);
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
  if (!gate_.admit(ctx, asked)) return;
  auto sandbox = create_for(*ctx.principal, *req, *egress);
  SandboxInfo info = sandbox->info();
  ctx.sandbox = info.id;
  ctx.response->set("Location", "/v1/sandboxes/" + info.id);
  send_json(ctx, 201, sandbox_json(info));
}

std::shared_ptr<Sandbox> Api::create_for(const Principal& principal, const CreateRequest& req,
                                         const Egress& egress) {
  auto manager = require_manager();
  const std::string& owner = principal.name;
  {
    std::lock_guard lock(mu_);
    // The Manager keeps a count per owner: no walk over every live sandbox under mu_.
    int owned = creating_[owner] + static_cast<int>(manager->count_owned(owner));
    if (owned >= principal.max_sandboxes) {
      throw limit_exceeded("token " + owner + " already has " + std::to_string(owned) +
                           " sandboxes (limit " + std::to_string(principal.max_sandboxes) + ")");
    }
    ++creating_[owner];
  }
  struct Release {
    Api* api;
    std::string owner;
    ~Release() {
      std::lock_guard lock(api->mu_);
      if (--api->creating_[owner] == 0) api->creating_.erase(owner);
    }
  } release{this, owner};

  CreateOptions options;
  options.hostname = req.hostname;
  options.cpus = req.cpus;
  options.memory_mb = req.memory_mb;
  options.disk_gb = req.disk_gb;
  options.egress = egress;
  options.ttl = std::chrono::seconds(req.ttl_seconds);
  options.labels = req.labels;
  options.owner = owner;
  options.profile = req.profile;
  options.node = req.node;
  options.node_selector = req.node_selector;
  auto sandbox = manager->create(options);
  if (!sandbox) throw from_error(sandbox.error());
  return *sandbox;
}

std::vector<SandboxInfo> Api::list_for(const Principal& principal, const Labels& selector) {
  auto manager = require_manager();
  std::vector<SandboxInfo> out;
  for (auto& info : manager->list(selector)) {
    if (principal.admin || info.owner == principal.name) out.push_back(std::move(info));
  }
  return out;
}

void Api::list(RequestContext& ctx) {
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
  for (const auto& info : list_for(*ctx.principal, *selector)) w.raw(sandbox_json(info));
  w.end_array().end_object();
  send_json(ctx, 200, w.take());
}

void Api::show(RequestContext& ctx) {
  auto sandbox = find_sandbox(ctx);
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::destroy(RequestContext& ctx) {
  auto sandbox = find_sandbox(ctx);
  terminals_->close_sandbox(sandbox->id());
  e2b_routes_.forget(sandbox->id());  // its E2B session and processes (docs/e2b.md)
  if (auto st = sandbox->destroy(); !st) throw from_error(st.error());
  send_empty(ctx, 204);
}

void Api::internet(RequestContext& ctx) {
  auto req = parse_internet(json_body(ctx));
  if (!req) throw req.error();
  ctx.params_json = "{\"internet\":" + egress_request_json(*req) + "}";
  auto sandbox = find_sandbox(ctx);
  auto egress = resolve_egress(*req, config_, ctx.principal->name);
  if (!egress) throw egress.error();
  PolicyRequest asked;
  asked.action = PolicyAction::kInternet;
  set_policy_egress(asked, *egress);
  asked.canonical = canonical_internet(*egress);
  if (!gate_.admit(ctx, asked)) return;
  if (auto st = sandbox->set_egress(*egress); !st) throw from_error(st.error());
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::ttl(RequestContext& ctx) {
  auto seconds = parse_ttl(json_body(ctx), config_);
  if (!seconds) throw seconds.error();
  ctx.params_json = "{\"ttl_seconds\":" + std::to_string(*seconds) + "}";
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->extend_ttl(std::chrono::seconds(*seconds)); !st) {
    throw from_error(st.error());
  }
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

}  // namespace pvs::service
