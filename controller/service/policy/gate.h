// The policy gate: the one path every guarded call passes, from a REST handler, a terminal's
// input or an MCP tool (docs/policy.md). It asks the rules (policy.h), and for an `approve`
// verdict opens an approval (approvals.h), tells the webhook (webhook.h) and waits for a
// person up to approval_wait_seconds.
//
//   PolicyGate gate(config, &metrics, replies);
//   if (!gate.admit(ctx, asked)) return;            // REST: false when the 202 was sent
//   record.policy_json = gate.admit_tool(who, sandbox_id, asked, progress);   // MCP
//
// A refusal (deny, denied, expired) is thrown: PolicyRefusal by admission(), ApiError 403 by
// admit() and admit_tool(); the decision always lands in the audit record.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/config/config.h"
#include "core/observability/metrics.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "policy/approvals.h"
#include "policy/policy.h"
#include "policy/webhook.h"

namespace pvs::service {

class JsonWriter;
// An approval as GET /v1/approvals/{id} shows it.
void write_approval(JsonWriter& w, const Approval& a);
std::string approval_json(const Approval& a);

class PolicyGate {
 public:
  // Told once a second while a call waits for a person: (seconds waited, seconds it may wait,
  // what it waits for). MCP sends it as notifications/progress.
  using WaitProgress = std::function<void(double, double, const std::string&)>;
  struct Admission {
    std::optional<Approval> pending;  // still waiting for a person
    std::string policy_json;          // the decision, for the audit log
  };

  PolicyGate(const ServiceConfig& config, Metrics* metrics, Replies& replies);
  ~PolicyGate();

  // The policy's decision on a call, and for `approve` the approval's outcome. Throws
  // PolicyRefusal for deny, denied and expired.
  Admission admission(const Principal& who, const std::string& sandbox,
                      const PolicyRequest& request, const std::string& approval_id, bool async);
  // The same for a decision already made (terminal input judges each line, then admits once).
  Admission admission(const Principal& who, const std::string& sandbox,
                      const PolicyRequest& request, const PolicyDecision& decision,
                      const std::string& approval_id, bool async,
                      const WaitProgress& progress = {});
  // The policy's say on a REST call: true to go on; false when the reply was sent (202:
  // waiting for a person). Throws 403 for deny, denied or expired approvals.
  bool admit(RequestContext& ctx, const PolicyRequest& request);
  // The same for an admission the caller runs itself (terminal open, terminal input): `run`
  // gets the request's Approval header and whether it prefers respond-async; the decision
  // lands on `ctx`, a refusal is thrown as its ApiError.
  using Run = std::function<Admission(const std::string& approval_id, bool async)>;
  bool admit_with(RequestContext& ctx, const Run& run);
  // 202 with the approval a call waits for (Location: /v1/approvals/{id}).
  void send_pending(RequestContext& ctx, const Approval& pending);
  // The same for an MCP tool: returns the decision for the audit log; throws an ApiError for
  // deny, denied, expired, or an approval still pending after approval_wait_seconds.
  // `resume`: the approval an earlier round of the same call (2026-07-28's requestState) waits
  // for; with `pending`, a call still waiting when it stops leaves the approval's id there.
  std::string admit_tool(const Principal& who, const std::string& sandbox,
                         const PolicyRequest& request, const WaitProgress& progress = {},
                         const std::string& resume = "", std::string* pending = nullptr);
  // An MCP call whose approval is still pending after approval_wait_seconds (503).
  static ApiError still_pending(const Approval& pending);

  // Whether `action` can be anything but allowed for `token` (Policy::judges).
  bool judges(const std::string& token, PolicyAction action) const {
    return config_.policy.judges(token, action);
  }
  Approvals& approvals() { return approvals_; }
  // Tells the webhook (policy.webhook), if one is configured.
  void notify(const char* event, const Approval& a);

 private:
  // A round of a 2026-07-28 call that waits for the approval `id` an earlier round opened.
  std::string resume_tool(const Principal& who, const std::string& sandbox,
                          const PolicyRequest& request, const WaitProgress& progress,
                          const std::string& id, std::string* pending);
  Result<Approval> wait_for_person(const Approval& opened, int seconds,
                                   const WaitProgress& progress);

  const ServiceConfig& config_;
  Metrics* metrics_;
  Replies& replies_;
  Approvals approvals_;
  std::unique_ptr<Webhook> webhook_;  // policy.webhook; null without one
};

}  // namespace pvs::service
