// E2B's control plane (docs/e2b.md): /e2b/v2/sandboxes, /e2b/sandboxes/{id}/... on the REST
// API's own operations (create_for, sandbox_for, list_for, the policy gate), so ownership,
// limits, policy, approvals, audit and metrics are the same. The key is E2B's X-API-Key, mapped
// to a token (auth.tokens[].e2b_key_sha256); every error answers in E2B's shape {code, message}.
// A create's approval binds the whole create (template, timeout, metadata, envVars, egress) and
// a network change's shows what the sandbox was refused, as REST's do (docs/policy.md).
#include <limits>

#include "api/sandboxes/egress_log_view.h"
#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "e2b/sessions.h"
#include "http/json.h"
#include "policy/canonical.h"
#include "policy/egress_access.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

e2b::SandboxView view_of(const SandboxInfo& info, const e2b::SandboxSession& session,
                         const std::string& domain) {
  e2b::SandboxView v;
  v.id = info.id;
  v.template_id = session.template_id;
  v.client_id = info.owner;
  v.access_token = session.access_token;
  v.traffic_token = session.traffic_token;
  if (!domain.empty()) v.domain = domain;
  v.started_at = info.created_at;
  v.end_at = info.expires_at;
  v.cpus = info.cpus;
  v.memory_mb = info.memory_mb;
  v.disk_mb = info.disk_gb * 1024;
  v.metadata = info.labels;
  v.allow_internet = info.egress.mode != Egress::Mode::kOff;
  if (info.egress.allowlist()) v.allow_out = info.egress.list.names;
  v.paused = info.phase == SandboxMetadata::Phase::kPaused;
  v.pause_on_timeout = info.on_expiry.pause;
  v.auto_resume = info.on_expiry.auto_resume;
  return v;
}

namespace {

// The envVars are the environment of every command the sandbox will run, so the names are
// judged at create as exec judges a command's env names: where they make exec's decision
// stricter than it is without them (an `env_names` rule), that decision is the create's too.
PolicyDecision create_decision(const Policy& policy, const std::string& token,
                               const PolicyRequest& create) {
  PolicyDecision d = policy.decide(token, create);
  if (create.env_names.empty()) return d;
  PolicyRequest with, without;
  with.action = without.action = PolicyAction::kExec;
  with.env_names = create.env_names;
  PolicyDecision e = policy.decide(token, with);
  if (strictness(e.verdict) > strictness(policy.decide(token, without).verdict) &&
      strictness(e.verdict) > strictness(d.verdict))
    return e;
  return d;
}

std::string template_profile(const std::string& template_id) {
  if (template_id == e2b::kDefaultTemplate) return "";
  if (!valid_pool_profile_name(template_id))
    throw bad_request("templateID \"" + template_id +
                      "\": pve-sandbox serves \"base\" (the default template), its hot-pool "
                      "profiles (GET /v1/pools) and custom templates (GET /v1/templates)");
  return template_id;
}

}  // namespace

E2bRoutes::E2bRoutes(Deps deps)
    : d_(std::move(deps)),
      sessions_(d_.config.e2b_sessions_file),
      denied_({std::chrono::seconds(d_.config.audit_denied_interval_seconds), 1024}) {
  if (!sessions_.load_error().empty())
    log::error("e2b.sessions_file: " + sessions_.load_error() +
               ": starting without the kept sessions (Sandbox.connect mints new tokens)");
}

E2bRoutes::~E2bRoutes() {
  sessions_.shutdown();
}

std::string E2bRoutes::admit(const Principal& who, const std::string& sandbox,
                             const PolicyRequest& asked) {
  // A progress callback that does nothing: the gate waits in slices and reports each one.
  return d_.gate.admit_tool(who, sandbox, asked, [](double, double, const std::string&) {});
}

std::string E2bRoutes::admit_decided(const Principal& who, const std::string& sandbox,
                                     const PolicyRequest& asked, const PolicyDecision& decision) {
  try {
    auto a = d_.gate.admission(who, sandbox, asked, decision, "", false,
                               [](double, double, const std::string&) {});
    if (a.pending) throw PolicyGate::still_pending(*a.pending);
    return a.policy_json;
  } catch (const PolicyRefusal& refused) {
    throw refused.error;
  }
}

int E2bRoutes::max_ttl() const {
  return static_cast<int>(d_.config.manager.max_ttl.count());
}

// A refused key, aggregated per source as the REST API's refusals are.
void E2bRoutes::audit_denied(RequestContext& ctx, const DeniedLog::Line& line,
                             std::string_view reason) {
  AuditRecord r;
  r.request_id = ctx.request_id;
  r.remote = line.remote;
  r.action = "auth.denied";
  JsonWriter p;
  p.begin_object();
  if (line.first)
    p.key("method")
        .value(ctx.method.substr(0, 16))
        .key("route")
        .value(ctx.route)
        .key("reason")
        .value(reason);
  else
    p.key("count").value(line.count);
  r.params_json = p.end_object().take();
  r.status = 401;
  r.error_code = "unauthenticated";
  d_.audit(r);
}

// The kept sessions of sandboxes destroyed while the controller was down go from the file, at
// an E2B call: those of a node once a reconcile pass has read it whole, at most once per pass,
// and for good once every node has been. Before (the Manager not open yet, or a pass cut short
// by a refused Proxmox read) a sandbox not adopted yet answers 404 too, so its session stays. A
// session whose owner is no longer configured stays (its sandbox may still be listed and killed).
void E2bRoutes::prune_kept_sessions() {
  if (pruned_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(prune_mu_);
  if (pruned_.load(std::memory_order_relaxed)) return;
  Deps::Recovery now{true, pruned_pass_ + 1, {}};
  if (d_.recovery) now = d_.recovery();
  if (!now.open || now.passes == pruned_pass_) return;
  pruned_pass_ = now.passes;
  sessions_.prune_kept([this, &now](const e2b::SessionRecord& r) {
    if (!e2b::kept_prunable(r, now.unrecovered)) return false;
    auto owner = d_.tokens.find(r.owner);
    if (!owner) return false;
    try {
      d_.sandbox_for(*owner, r.id);
      return false;
    } catch (const ApiError& e) {
      return e.status == 404;
    }
  });
  if (now.unrecovered.empty()) pruned_.store(true, std::memory_order_release);
}

void E2bRoutes::control(RequestContext& ctx, const std::function<void()>& work) {
  prune_kept_sessions();
  try {
    std::string key = ctx.request->get("X-API-Key", "");
    ctx.principal = d_.tokens.authenticate_e2b_key(key);
    if (!ctx.principal) {
      auto now = DeniedLog::Clock::now();
      for (const auto& line : denied_.flush(now)) audit_denied(ctx, line, "");
      if (auto line = denied_.record(ctx.request->clientAddress().host().toString(), now))
        audit_denied(ctx, *line, key.empty() ? "missing" : "unknown_e2b_key");
      throw unauthenticated("missing or unknown E2B API key (X-API-Key)");
    }
    auto slot = take_slot(ctx, TokenLimits::Kind::kRequest);
    work();
  } catch (const ApiError& e) {
    if (ctx.responded) throw;
    ctx.error = e;
    d_.replies.send_bytes(ctx, e.status, "application/json", e2b::e2b_error_body(e));
  }
}

void E2bRoutes::create(RequestContext& ctx) {
  control(ctx, [&] {
    auto req = e2b::parse_new_sandbox(d_.replies.json_body(ctx), {max_ttl()});
    if (!req) throw req.error();
    // A custom template's name (docs/templates.md), else a hot-pool profile's (or "base").
    if (d_.is_custom_template && d_.is_custom_template(req->template_id))
      req->create.template_name = req->template_id;
    else
      req->create.profile = template_profile(req->template_id);
    auto egress = resolve_egress(req->create.internet, d_.config, ctx.principal->name);
    if (!egress) throw egress.error();
    JsonWriter p;
    p.begin_object().key("templateID").value(req->template_id);
    p.key("ttl_seconds").value(req->create.ttl_seconds).key("labels").value(req->create.labels);
    if (req->create.pause_on_expiry)
      p.key("on_expiry").value("pause").key("auto_resume").value(req->create.auto_resume);
    p.key("internet").raw(egress_request_json(req->create.internet)).key("env_names").begin_array();
    for (const auto& [k, v] : req->env_vars) p.value(k);
    ctx.params_json = p.end_array().end_object().take();
    PolicyRequest asked;
    asked.action = PolicyAction::kSandboxCreate;
    asked.cpus = req->create.cpus;
    asked.memory_mb = req->create.memory_mb;
    asked.disk_gb = req->create.disk_gb;
    set_policy_egress(asked, *egress);
    for (const auto& [name, value] : req->env_vars) asked.env_names.push_back(name);
    asked.canonical = canonical_e2b_create(req->create, *egress, req->template_id, req->env_vars);
    ctx.policy_json = admit_decided(*ctx.principal, "", asked,
                                    create_decision(d_.config.policy, ctx.principal->name, asked));
    auto sandbox = d_.create_for(*ctx.principal, req->create, *egress);
    ctx.sandbox = sandbox->id();
    auto session = sessions_.ensure(sandbox, req->template_id, req->env_vars, req->ports);
    d_.replies.send_json(
        ctx, 201, e2b::sandbox_reply(view_of(sandbox->info(), *session, d_.config.e2b_domain)));
  });
}

void E2bRoutes::connect(RequestContext& ctx) {
  control(ctx, [&] {
    auto timeout = e2b::parse_connect(d_.replies.json_body(ctx), max_ttl());
    if (!timeout) throw timeout.error();
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    if (sandbox->info().phase == SandboxMetadata::Phase::kPaused) {
      // Resumed (its timeout, else the time it had left), answered 201; one resumed meanwhile
      // by another call is running: on as below.
      auto st = sandbox->resume(std::chrono::seconds(*timeout));
      if (st) {
        auto session = sessions_.ensure(sandbox);
        d_.replies.send_json(
            ctx, 201, e2b::sandbox_reply(view_of(sandbox->info(), *session, d_.config.e2b_domain)));
        return;
      }
      if (st.error().code != ErrorCode::kConflict) throw from_error(st.error());
    }
    // Connecting only extends the timeout, never shortens it (E2B's rule).
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    if (*timeout > 0 && sandbox->info().expires_at < now + *timeout)
      if (auto st = sandbox->extend_ttl(std::chrono::seconds(*timeout)); !st)
        throw from_error(st.error());
    auto session = sessions_.ensure(sandbox);
    d_.replies.send_json(
        ctx, 200, e2b::sandbox_reply(view_of(sandbox->info(), *session, d_.config.e2b_domain)));
  });
}

void E2bRoutes::pause(RequestContext& ctx) {
  control(ctx, [&] {
    auto mode = e2b::parse_pause(d_.replies.json_body(ctx));
    if (!mode) throw mode.error();
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    // Paused already: 409, which the SDK's pause() turns into `false`.
    if (auto st = sandbox->pause(*mode); !st) throw from_error(st.error());
    d_.replies.send_empty(ctx, 204);
  });
}

void E2bRoutes::list(RequestContext& ctx) {
  control(ctx, [&] {
    auto q = e2b::parse_list_query(ctx.query);
    if (!q) throw q.error();
    std::vector<e2b::SandboxView> page;
    if ((q->running || q->paused) && !label_error(q->metadata)) {
      auto all = d_.list_for(*ctx.principal, q->metadata);
      std::erase_if(all, [&](const SandboxInfo& s) {
        return (s.phase == SandboxMetadata::Phase::kPaused) ? !q->paused : !q->running;
      });
      for (std::size_t i = q->offset; i < all.size() && page.size() < q->limit; ++i) {
        if (all[i].labels.count(e2b::kVolumeHelperLabel)) continue;  // the content plane's
        auto sandbox = d_.sandbox_for(*ctx.principal, all[i].id);
        auto session = sessions_.ensure(sandbox);
        if (q->template_id && *q->template_id != session->template_id) continue;
        page.push_back(view_of(all[i], *session, d_.config.e2b_domain));
        if (!all[i].volumes.empty())
          page.back().volume_mounts = mounts_of(all[i], d_.volumes_for(*ctx.principal));
      }
      if (q->offset + q->limit < all.size())
        ctx.response->set("X-Next-Token", e2b::next_token(q->offset + q->limit));
    }
    d_.replies.send_json(ctx, 200, e2b::list_reply(page));
  });
}

void E2bRoutes::show(RequestContext& ctx) {
  control(ctx, [&] {
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    auto session = sessions_.ensure(sandbox);
    auto info = sandbox->info();
    auto view = view_of(info, *session, d_.config.e2b_domain);
    if (!info.volumes.empty()) view.volume_mounts = mounts_of(info, d_.volumes_for(*ctx.principal));
    d_.replies.send_json(ctx, 200, e2b::detail_reply(view));
  });
}

void E2bRoutes::kill(RequestContext& ctx) {
  control(ctx, [&] {
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    sessions_.erase(sandbox->id());
    d_.destroy(*sandbox);
    d_.replies.send_empty(ctx, 204);
  });
}

void E2bRoutes::timeout(RequestContext& ctx) {
  control(ctx, [&] {
    auto seconds = e2b::parse_timeout(d_.replies.json_body(ctx), max_ttl());
    if (!seconds) throw seconds.error();
    ctx.params_json = "{\"timeout\":" + std::to_string(*seconds) + "}";
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    if (auto st = sandbox->extend_ttl(std::chrono::seconds(*seconds)); !st)
      throw from_error(st.error());
    d_.replies.send_empty(ctx, 204);
  });
}

void E2bRoutes::network(RequestContext& ctx) {
  control(ctx, [&] {
    auto req = e2b::parse_network_update(d_.replies.json_body(ctx));
    if (!req) throw req.error();
    ctx.params_json = "{\"internet\":" + egress_request_json(*req) + "}";
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    ctx.sandbox = sandbox->id();
    auto egress = resolve_egress(*req, d_.config, ctx.principal->name);
    if (!egress) throw egress.error();
    // REST's view: the canonical egress, and for the person the names it was refused so far.
    PolicyRequest asked = internet_request(egress_log_or_empty(*sandbox), *egress);
    ctx.policy_json = admit(*ctx.principal, sandbox->id(), asked);
    if (auto st = sandbox->set_egress(*egress); !st) throw from_error(st.error());
    d_.replies.send_empty(ctx, 204);
  });
}

// Proxmox's history of the container (usage.h): a sample a minute over the last hour, coarser
// further back, and the live one when the window reaches the present.
void E2bRoutes::metrics(RequestContext& ctx) {
  control(ctx, [&] {
    auto q = e2b::parse_metrics_query(ctx.query);
    if (!q) throw q.error();
    auto sandbox = d_.sandbox_for(*ctx.principal, ctx.params.at("id"));
    auto samples = sandbox->usage(q->start.value_or(0),
                                  q->end.value_or(std::numeric_limits<std::int64_t>::max()));
    if (!samples) throw from_error(samples.error());
    std::vector<e2b::MetricView> out;
    for (const auto& s : *samples) {
      e2b::MetricView m;
      m.timestamp = s.time;
      m.cpus = static_cast<int>(s.cpus);
      m.cpu_used_pct = s.cpu * 100.0;
      m.mem_used = s.mem;
      m.mem_total = s.maxmem;
      m.disk_used = s.disk;
      m.disk_total = s.maxdisk;
      out.push_back(m);
    }
    d_.replies.send_json(ctx, 200, e2b::metrics_reply(out));
  });
}

void E2bRoutes::unsupported(RequestContext& ctx) {
  control(ctx, [&] {
    throw ApiError{501, "not_implemented",
                   ctx.method + " " + ctx.path.substr(0, 200) +
                       " is not supported by pve-sandbox's E2B-compatible API (docs/e2b.md: "
                       "no /resume (connect resumes) or secrets)"};
  });
}

}  // namespace pvs::service
