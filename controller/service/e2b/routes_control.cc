// E2B's control plane (docs/e2b.md): /e2b/v2/sandboxes, /e2b/sandboxes/{id}/... on the REST
// API's own operations (create_for, sandbox_for, list_for, admit_tool), so ownership, limits,
// policy, approvals, audit and metrics are the same. The key is E2B's X-API-Key, mapped to a
// token (auth.tokens[].e2b_key_sha256); every error answers in E2B's shape {code, message}.
#include "e2b/control_wire.h"
#include "e2b/sessions.h"
#include "egress_access.h"
#include "json.h"
#include "server.h"

namespace pvs::service {
namespace {

e2b::SandboxView view_of(const SandboxInfo& info, const e2b::SandboxSession& session,
                         const std::string& domain) {
  e2b::SandboxView v;
  v.id = info.id;
  v.template_id = session.template_id;
  v.client_id = info.owner;
  v.access_token = session.access_token;
  if (!domain.empty()) v.domain = domain;
  v.started_at = info.created_at;
  v.end_at = info.expires_at;
  v.cpus = info.cpus;
  v.memory_mb = info.memory_mb;
  v.disk_mb = info.disk_gb * 1024;
  v.metadata = info.labels;
  v.allow_internet = info.egress.mode != Egress::Mode::kOff;
  if (info.egress.allowlist()) v.allow_out = info.egress.list.names;
  return v;
}

std::string template_profile(const std::string& template_id) {
  if (template_id == e2b::kDefaultTemplate) return "";
  if (!valid_pool_profile_name(template_id))
    throw bad_request("templateID \"" + template_id +
                      "\": pve-sandbox serves \"base\" (the default template) and its hot-pool "
                      "profiles (GET /v1/pools), whose names are 1-32 of [a-z0-9-]");
  return template_id;
}

}  // namespace

void Api::e2b_control(RequestContext& ctx, const std::function<void()>& work) {
  try {
    std::string key = ctx.request->get("X-API-Key", "");
    ctx.principal = tokens_.authenticate_e2b_key(key);
    if (!ctx.principal) {
      auto now = DeniedLog::Clock::now();
      for (const auto& line : denied_.flush(now)) audit_denied(ctx, line, "");
      if (auto line = denied_.record(ctx.request->clientAddress().host().toString(), now))
        audit_denied(ctx, *line, key.empty() ? "missing" : "unknown_e2b_key");
      throw unauthenticated("missing or unknown E2B API key (X-API-Key)");
    }
    auto slot = limits_.acquire(ctx.principal->name, TokenLimits::Kind::kRequest);
    if (!slot) {
      ctx.response->set("Retry-After", "1");
      throw limit_exceeded("token " + ctx.principal->name + " has too many requests in flight");
    }
    work();
  } catch (const ApiError& e) {
    if (ctx.responded) throw;
    ctx.error = e;
    send_bytes(ctx, e.status, "application/json", e2b::e2b_error_body(e));
  }
}

void Api::e2b_create(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto req = e2b::parse_new_sandbox(json_body(ctx), {static_cast<int>(config_.manager.max_ttl.count())});
    if (!req) throw req.error();
    req->create.profile = template_profile(req->template_id);
    auto egress = resolve_egress(req->create.internet, config_, ctx.principal->name);
    if (!egress) throw egress.error();
    JsonWriter p;
    p.begin_object().key("templateID").value(req->template_id);
    p.key("ttl_seconds").value(req->create.ttl_seconds).key("labels").value(req->create.labels);
    p.key("internet").raw(egress_request_json(req->create.internet)).key("env_names").begin_array();
    for (const auto& [k, v] : req->env_vars) p.value(k);
    ctx.params_json = p.end_array().end_object().take();
    PolicyRequest asked;
    asked.action = PolicyAction::kSandboxCreate;
    asked.cpus = req->create.cpus;
    asked.memory_mb = req->create.memory_mb;
    set_policy_egress(asked, *egress);
    ctx.policy_json = admit_tool(*ctx.principal, "", asked);
    auto sandbox = create_for(*ctx.principal, req->create, *egress);
    ctx.sandbox = sandbox->id();
    auto session = e2b_sessions_->ensure(sandbox, *ctx.principal, req->template_id, req->env_vars);
    send_json(ctx, 201, e2b::sandbox_reply(view_of(sandbox->info(), *session, config_.e2b_domain)));
  });
}

void Api::e2b_connect(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto timeout = e2b::parse_connect(json_body(ctx), static_cast<int>(config_.manager.max_ttl.count()));
    if (!timeout) throw timeout.error();
    auto sandbox = sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    // Connecting only extends the timeout, never shortens it (E2B's rule).
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
    if (sandbox->info().expires_at < now + *timeout)
      if (auto st = sandbox->extend_ttl(std::chrono::seconds(*timeout)); !st)
        throw from_error(st.error());
    auto session = e2b_sessions_->ensure(sandbox, *ctx.principal);
    send_json(ctx, 200, e2b::sandbox_reply(view_of(sandbox->info(), *session, config_.e2b_domain)));
  });
}

void Api::e2b_list(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto q = e2b::parse_list_query(ctx.query);
    if (!q) throw q.error();
    std::vector<e2b::SandboxView> page;
    if (q->running && !label_error(q->metadata)) {
      auto all = list_for(*ctx.principal, q->metadata);
      for (std::size_t i = q->offset; i < all.size() && page.size() < q->limit; ++i) {
        auto sandbox = sandbox_for(*ctx.principal, all[i].id);
        auto session = e2b_sessions_->ensure(sandbox, *ctx.principal);
        if (q->template_id && *q->template_id != session->template_id) continue;
        page.push_back(view_of(all[i], *session, config_.e2b_domain));
      }
      if (q->offset + q->limit < all.size())
        ctx.response->set("X-Next-Token", e2b::next_token(q->offset + q->limit));
    }
    send_json(ctx, 200, e2b::list_reply(page));
  });
}

void Api::e2b_show(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto sandbox = sandbox_for(*ctx.principal, ctx.params.at("id"));
    auto session = e2b_sessions_->ensure(sandbox, *ctx.principal);
    send_json(ctx, 200, e2b::detail_reply(view_of(sandbox->info(), *session, config_.e2b_domain)));
  });
}

void Api::e2b_kill(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto sandbox = sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    e2b_sessions_->erase(sandbox->id());
    terminals_->close_sandbox(sandbox->id());
    if (auto st = sandbox->destroy(); !st) throw from_error(st.error());
    send_empty(ctx, 204);
  });
}

void Api::e2b_timeout(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto seconds = e2b::parse_timeout(json_body(ctx), static_cast<int>(config_.manager.max_ttl.count()));
    if (!seconds) throw seconds.error();
    ctx.params_json = "{\"timeout\":" + std::to_string(*seconds) + "}";
    auto sandbox = sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    if (auto st = sandbox->extend_ttl(std::chrono::seconds(*seconds)); !st)
      throw from_error(st.error());
    send_empty(ctx, 204);
  });
}

void Api::e2b_network(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto req = e2b::parse_network_update(json_body(ctx));
    if (!req) throw req.error();
    ctx.params_json = "{\"internet\":" + egress_request_json(*req) + "}";
    auto sandbox = sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    auto egress = resolve_egress(*req, config_, ctx.principal->name);
    if (!egress) throw egress.error();
    PolicyRequest asked;
    asked.action = PolicyAction::kInternet;
    set_policy_egress(asked, *egress);
    ctx.policy_json = admit_tool(*ctx.principal, sandbox->id(), asked);
    if (auto st = sandbox->set_egress(*egress); !st) throw from_error(st.error());
    send_empty(ctx, 204);
  });
}

void Api::e2b_metrics(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    auto sandbox = sandbox_for(*ctx.principal, ctx.params.at("id"));
    auto status = sandbox->status();
    if (!status) throw from_error(status.error());
    e2b::MetricView m;
    m.timestamp = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    m.cpus = static_cast<int>(status->cpus);
    m.cpu_used_pct = status->cpu * 100.0;
    m.mem_used = status->mem;
    m.mem_total = status->maxmem;
    m.disk_used = status->disk;
    m.disk_total = status->maxdisk;
    send_json(ctx, 200, e2b::metrics_reply({m}));
  });
}

void Api::e2b_unsupported(RequestContext& ctx) {
  e2b_control(ctx, [&] {
    throw ApiError{501, "not_implemented",
                   ctx.method + " " + ctx.path.substr(0, 200) +
                       " is not supported by pve-sandbox's E2B-compatible API (docs/e2b.md: "
                       "no pause, resume, fork, E2B snapshots, templates, volumes or secrets)"};
  });
}

}  // namespace pvs::service
