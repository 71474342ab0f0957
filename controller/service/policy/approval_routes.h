// The approval routes (GET /v1/approvals, GET /v1/approvals/{id}, POST .../approve and
// .../deny): people list what waits for them and decide it. An agent's token sees its own
// approvals; an admin or approver token sees and decides all of them.
#pragma once

#include "http/replies.h"
#include "http/request_context.h"
#include "policy/gate.h"

namespace pvs::service {

class ApprovalRoutes {
 public:
  ApprovalRoutes(PolicyGate& gate, Replies& replies) : gate_(gate), replies_(replies) {}

  void list(RequestContext& ctx);
  void show(RequestContext& ctx);
  void approve(RequestContext& ctx) { decide(ctx, true); }
  void deny(RequestContext& ctx) { decide(ctx, false); }

 private:
  void decide(RequestContext& ctx, bool approve);

  PolicyGate& gate_;
  Replies& replies_;
};

}  // namespace pvs::service
