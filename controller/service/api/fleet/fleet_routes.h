// The fleet (admin): GET /v1/nodes (health, capacity, sandboxes and pools per node), POST
// /v1/nodes/{name}/drain and /undrain, GET /v1/pools (what each hot profile and warm pool holds
// and serves). Needs only the Manager, through a source that answers 503 until it is there,
// and the reply helpers.
#pragma once

#include <functional>
#include <memory>

#include "http/json.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

class FleetRoutes {
 public:
  // `manager` returns the Manager or throws ApiError 503 (starting).
  using ManagerSource = std::function<std::shared_ptr<Manager>()>;
  FleetRoutes(ManagerSource manager, Replies& replies)
      : manager_(std::move(manager)), replies_(replies) {}

  void nodes(RequestContext& ctx);
  void drain(RequestContext& ctx) { set_drain(ctx, true); }
  void undrain(RequestContext& ctx) { set_drain(ctx, false); }
  void pools(RequestContext& ctx);

 private:
  void set_drain(RequestContext& ctx, bool drained);

  ManagerSource manager_;
  Replies& replies_;
};

// One pool as JSON (GET /v1/pools, and each node's pools in GET /v1/nodes).
void write_pool(JsonWriter& w, const PoolInfo& pool);

}  // namespace pvs::service
