#include <Poco/String.h>

#include "http/json.h"
#include "policy/canonical.h"
#include "policy/gate.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {
namespace {

ApiError forbidden(std::string message) {
  return from_error(Error{ErrorCode::kPermissionDenied, std::move(message)});
}

// A refusal by the policy, with its decision for the audit log.
PolicyRefusal forbidden(std::string message, std::string policy_json) {
  return {forbidden(std::move(message)), std::move(policy_json)};
}

std::string ms_time(std::int64_t ms) {
  return ms ? iso_time(ms / 1000) : "";
}

// "on", "off", or "allow a.org,b.org (list L)".
std::string egress_summary(const PolicyRequest& r) {
  if (r.egress != "allowlist") return r.egress;
  std::string s = "allow";
  for (std::size_t i = 0; i < r.egress_names.size(); ++i)
    s += (i == 0 ? " " : ",") + r.egress_names[i];
  if (!r.egress_ports.empty()) {
    s += " ports";
    for (std::size_t i = 0; i < r.egress_ports.size(); ++i)
      s += (i == 0 ? " " : ",") + std::to_string(r.egress_ports[i]);
  }
  if (!r.egress_list.empty()) s += " (list " + r.egress_list + ")";
  return s;
}

// What the rules see of a request, and what a person reads, in one line.
std::string summary_of(const PolicyRequest& r) {
  switch (r.action) {
    case PolicyAction::kExec:
    case PolicyAction::kTerminalInput:
    case PolicyAction::kTerminalOpen:
    case PolicyAction::kTerminalAttach: return cut_for_display(r.text, 1024);
    case PolicyAction::kFilesWrite:
    case PolicyAction::kFilesEdit: return r.path;
    case PolicyAction::kInternet: return "internet " + egress_summary(r);
    case PolicyAction::kSandboxCreate:
      return std::to_string(r.cpus) + " cpus, " + std::to_string(r.memory_mb) + " MB, disk " +
             std::to_string(r.disk_gb) + " GB" +
             (r.internet ? ", internet " + egress_summary(r) : "");
    case PolicyAction::kPorts:
      return "port " + std::to_string(r.port) + ": " + cut_for_display(r.text, 1024);
  }
  return "";
}

// The call's digest: its action, sandbox, the fields the rules see and the whole request in
// canonical form (every field the handler acts on: env, cwd, stdin, content, ports, ttl, ...).
std::string digest_of(const std::string& sandbox, const PolicyRequest& r) {
  return sha256_hex(std::string(to_string(r.action)) + "\n" + sandbox + "\n" + r.text + "\n" +
                    r.path + "\n" + std::to_string(r.cpus) + "," + std::to_string(r.memory_mb) +
                    "," + std::to_string(r.disk_gb) + "," + (r.internet ? "1" : "0") + "\n" +
                    egress_summary(r) + "\n" + r.canonical);
}

}  // namespace

void write_approval(JsonWriter& w, const Approval& a) {
  w.begin_object();
  w.key("id").value(a.id).key("state").value(to_string(a.state));
  w.key("token").value(a.request.token).key("action").value(a.request.action);
  w.key("sandbox").value(a.request.sandbox).key("summary").value(a.request.summary);
  // The whole call, every field the digest covers, uncut.
  if (!a.request.fields.empty()) w.key("request").raw(a.request.fields);
  if (!a.request.refused_names.empty()) {
    w.key("refused_names").begin_array();
    for (const auto& n : a.request.refused_names) w.value(n);
    w.end_array();
  }
  w.key("rule").value(a.request.rule).key("message").value(a.request.message);
  w.key("created_at").value(ms_time(a.created_ms));
  w.key("deadline").value(ms_time(a.deadline_ms));
  if (a.state != Approval::State::kPending) {
    w.key("decided_at").value(ms_time(a.decided_ms)).key("decided_by").value(a.decided_by);
    w.key("reason").value(a.reason);
  }
  if (a.use_by_ms) w.key("use_by").value(ms_time(a.use_by_ms));
  w.key("used").value(a.consumed);
  w.end_object();
}

std::string approval_json(const Approval& a) {
  JsonWriter w;
  write_approval(w, a);
  return w.take();
}

PolicyGate::PolicyGate(const ServiceConfig& config, Metrics* metrics, Replies& replies)
    : config_(config),
      metrics_(metrics),
      replies_(replies),
      approvals_({std::chrono::seconds(config_.approval_timeout_seconds),
                  std::chrono::seconds(config_.approval_use_seconds),
                  static_cast<std::size_t>(config_.max_pending_approvals), 10000}) {
  if (!config_.webhook.url.empty()) {
    webhook_ = std::make_unique<Webhook>(config_.webhook, [this](std::string_view outcome) {
      metrics_->inc("pvs_webhook_deliveries_total", {{"outcome", std::string(outcome)}});
    });
  }
}

PolicyGate::~PolicyGate() = default;

// Waits for a decision up to `seconds`, telling `progress` once a second.
Result<Approval> PolicyGate::wait_for_person(const Approval& opened, int seconds,
                                             const WaitProgress& progress) {
  using namespace std::chrono;
  auto started = steady_clock::now();
  auto until = started + std::chrono::seconds(seconds);
  while (true) {
    auto left = std::max(milliseconds(0), duration_cast<milliseconds>(until - steady_clock::now()));
    auto a = approvals_.wait(opened.id, progress ? std::min<milliseconds>(left, 1s) : left);
    if (!a || a->state != Approval::State::kPending || steady_clock::now() >= until) return a;
    // Without a progress callback the wait may still end a moment early (the milliseconds
    // were truncated): wait out the rest.
    if (!progress) continue;
    progress(seconds_since(started), seconds,
             "waiting for a person to approve " + opened.request.summary + " (approval " +
                 opened.id + ", " + opened.request.rule + ")");
  }
}

PolicyGate::Admission PolicyGate::admission(const Principal& who, const std::string& sandbox,
                                            const PolicyRequest& request,
                                            const std::string& approval_id, bool async) {
  return admission(who, sandbox, request, config_.policy.decide(who.name, request), approval_id,
                   async);
}

PolicyGate::Admission PolicyGate::admission(const Principal& who, const std::string& sandbox,
                                            const PolicyRequest& request, const PolicyDecision& d,
                                            const std::string& approval_id, bool async,
                                            const WaitProgress& progress) {
  std::string action(to_string(request.action));
  metrics_->inc("pvs_policy_decisions_total",
                {{"action", action}, {"verdict", std::string(to_string(d.verdict))}});
  Admission out;
  auto record = [&](const Approval* a, double waited_ms) {
    JsonWriter w;
    w.begin_object().key("verdict").value(to_string(d.verdict)).key("rule").value(d.rule);
    if (a) {
      w.key("approval").value(a->id).key("state").value(to_string(a->state));
      if (!a->decided_by.empty()) w.key("decided_by").value(a->decided_by);
      w.key("waited_ms").value(waited_ms);
    }
    w.end_object();
    out.policy_json = w.take();
  };
  record(nullptr, 0);
  if (d.verdict == Verdict::kAllow) return out;
  std::string why = "policy rule " + d.rule + (d.message.empty() ? "" : ": " + d.message);
  if (d.verdict == Verdict::kDeny) throw forbidden("denied by " + why, out.policy_json);
  std::string digest = digest_of(sandbox, request);
  if (!approval_id.empty()) {  // a repeated call naming its approval
    auto used = approvals_.consume(approval_id, who.name, digest);
    auto a = approvals_.get(approval_id);
    record(a ? &*a : nullptr, 0);
    if (!used) throw forbidden(used.error().message, out.policy_json);
    return out;
  }
  if (auto a = approvals_.take_approved(who.name, digest)) {  // the same call, approved since
    record(&*a, 0);
    return out;
  }
  auto opened = approvals_.open({who.name, action, sandbox, summary_of(request), d.rule, d.message,
                                 digest, request.canonical, request.refused_names});
  if (!opened) throw limit_exceeded(opened.error().message);
  notify("approval.pending", *opened);
  log::info("approval " + opened->id + " pending: " + who.name + " " + action + " " +
            opened->request.summary);
  auto started = std::chrono::steady_clock::now();
  auto a = wait_for_person(*opened, async ? 0 : config_.approval_wait_seconds, progress);
  double waited = seconds_since(started) * 1000;
  metrics_->observe("pvs_approval_wait_seconds", {}, waited / 1000);
  if (!a) throw internal_error(a.error().message);
  record(&*a, waited);
  if (a->state == Approval::State::kApproved) {
    // Used once: a repeat naming it (or an MCP retry) may have used it since the decision.
    if (auto used = approvals_.consume(a->id, who.name, digest); !used)
      throw forbidden(used.error().message, out.policy_json);
    return out;
  }
  if (a->state == Approval::State::kPending) {
    out.pending = *a;
    return out;
  }
  throw forbidden("approval " + a->id + " " + to_string(a->state) + " by " + a->decided_by +
                      (a->reason.empty() ? "" : ": " + a->reason) + " (" + why + ")",
                  out.policy_json);
}

bool PolicyGate::admit(RequestContext& ctx, const PolicyRequest& request) {
  return admit_with(ctx, [&](const std::string& approval_id, bool async) {
    return admission(*ctx.principal, ctx.sandbox, request, approval_id, async);
  });
}

bool PolicyGate::admit_with(RequestContext& ctx, const Run& run) {
  bool async = Poco::icompare(ctx.request->get("Prefer", ""), "respond-async") == 0;
  Admission a;
  try {
    a = run(ctx.request->get("Approval", ""), async);
  } catch (const PolicyRefusal& refused) {
    ctx.policy_json = refused.policy_json;
    throw refused.error;
  }
  ctx.policy_json = a.policy_json;
  if (!a.pending) return true;
  send_pending(ctx, *a.pending);
  return false;
}

void PolicyGate::send_pending(RequestContext& ctx, const Approval& pending) {
  ctx.response->set("Location", "/v1/approvals/" + pending.id);
  JsonWriter w;
  w.begin_object().key("approval");
  write_approval(w, pending);
  w.end_object();
  replies_.send_json(ctx, 202, w.take());
}

ApiError PolicyGate::still_pending(const Approval& pending) {
  return from_error(Error{ErrorCode::kUnavailable,
                          "approval " + pending.id + " is pending: a person must approve " +
                              pending.request.summary +
                              " (GET /v1/approvals); call again with the same arguments once "
                              "it is approved"});
}

// A round of a 2026-07-28 call that waits for the approval `id` an earlier round opened (its
// requestState): waits on it again instead of opening another.
std::string PolicyGate::resume_tool(const Principal& who, const std::string& sandbox,
                                    const PolicyRequest& request, const WaitProgress& progress,
                                    const std::string& id, std::string* pending) {
  auto a = approvals_.get(id);
  if (!a || a->request.token != who.name) throw forbidden("no approval " + id.substr(0, 64));
  if (a->state == Approval::State::kPending) {
    auto started = std::chrono::steady_clock::now();
    a = wait_for_person(*a, config_.approval_wait_seconds, progress);
    metrics_->observe("pvs_approval_wait_seconds", {}, seconds_since(started));
    if (!a) throw internal_error(a.error().message);
  }
  JsonWriter w;
  w.begin_object().key("verdict").value("approve").key("rule").value(a->request.rule);
  w.key("approval").value(a->id).key("state").value(to_string(a->state));
  std::string policy = w.end_object().take();
  if (a->state == Approval::State::kPending) {
    if (pending) *pending = a->id;
    throw still_pending(*a);
  }
  if (auto used = approvals_.consume(id, who.name, digest_of(sandbox, request)); !used)
    throw forbidden(used.error().message, policy);
  return policy;
}

std::string PolicyGate::admit_tool(const Principal& who, const std::string& sandbox,
                                   const PolicyRequest& request, const WaitProgress& progress,
                                   const std::string& resume, std::string* pending) {
  if (!resume.empty()) return resume_tool(who, sandbox, request, progress, resume, pending);
  try {
    Admission a = admission(who, sandbox, request, config_.policy.decide(who.name, request), "",
                            false, progress);
    if (a.pending) {
      if (pending) *pending = a.pending->id;
      throw still_pending(*a.pending);
    }
    return a.policy_json;
  } catch (const PolicyRefusal& refused) {
    throw refused.error;
  }
}

void PolicyGate::notify(const char* event, const Approval& a) {
  if (!webhook_) return;
  JsonWriter w;
  w.begin_object().key("event").value(event).key("approval").raw(approval_json(a)).end_object();
  webhook_->post(event, w.take());
}

}  // namespace pvs::service
