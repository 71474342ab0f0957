// The approval routes: list, show, approve and deny (policy/approval_routes.h).
#include "policy/approval_routes.h"
#include "http/json.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

void ApprovalRoutes::list(RequestContext& ctx) {
  std::string state = ctx.query_value("state");
  if (!state.empty() && state != "pending") throw bad_request("state: only \"pending\"");
  const Principal& who = *ctx.principal;
  JsonWriter w;
  w.begin_object().key("approvals").begin_array();
  for (const Approval& a : gate_.approvals().list(!state.empty())) {
    if (who.admin || who.approver || a.request.token == who.name) write_approval(w, a);
  }
  w.end_array().end_object();
  replies_.send_json(ctx, 200, w.take());
}

void ApprovalRoutes::show(RequestContext& ctx) {
  auto a = gate_.approvals().get(ctx.params.at("id"));
  const Principal& who = *ctx.principal;
  // Another token's approval is as absent as an unknown one.
  if (!a ||
      !(who.admin || who.approver || a->request.token == who.name || a->request.token.empty()))
    throw not_found("no approval " + ctx.params.at("id").substr(0, 64));
  replies_.send_json(ctx, 200, approval_json(*a));
}

void ApprovalRoutes::decide(RequestContext& ctx, bool approve) {
  const Principal& who = *ctx.principal;
  if (!who.admin && !who.approver)
    throw from_error(Error{ErrorCode::kPermissionDenied,
                           "deciding approvals needs an admin token or one with approver: true"});
  std::string reason;
  if (auto body = replies_.json_body(ctx); !body.empty()) {
    auto parsed = JsonBody::parse(body);
    if (!parsed) throw parsed.error();
    if (auto r = parsed->string("reason", 512)) reason = *r;
    if (auto err = parsed->finish()) throw *err;
  }
  const std::string& id = ctx.params.at("id");
  JsonWriter p;
  p.begin_object().key("approval").value(id).key("reason").value(reason).end_object();
  ctx.params_json = p.take();
  auto a = gate_.approvals().decide(id, approve, who.name, reason);
  if (!a) throw from_error(a.error());
  ctx.sandbox = a->request.sandbox;
  log::info("approval " + id + (approve ? " approved" : " denied") + " by " + who.name);
  gate_.notify("approval.decided", *a);
  replies_.send_json(ctx, 200, approval_json(*a));
}

}  // namespace pvs::service
