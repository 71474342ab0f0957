#include "api/fleet/fleet_routes.h"
#include "http/json.h"

namespace pvs::service {

void write_pool(JsonWriter& w, const PoolInfo& p) {
  w.begin_object();
  w.key("name").value(p.name).key("node").value(p.node).key("kind").value(p.hot ? "hot" : "warm");
  w.key("template_vmid").value(p.template_vmid);
  if (p.hot) {
    w.key("cpus").value(p.cpus).key("memory_mb").value(p.memory_mb);
    w.key("disk_gb").value(p.disk_gb);
  }
  w.key("size").value(p.size).key("ready").value(p.ready).key("filling").value(p.filling);
  w.key("claims").value(p.claims).key("misses").value(p.misses);
  w.key("refill_failures").value(p.refill_failures).key("replaced").value(p.replaced);
  if (p.hot) {
    const CallStats& c = p.claim_latency;
    double mean_ms = c.count ? c.sum_seconds * 1000 / static_cast<double>(c.count) : 0;
    w.key("claim_mean_ms").value(mean_ms);
  }
  w.end_object();
}

void FleetRoutes::pools(RequestContext& ctx) {
  auto manager = manager_();
  JsonWriter w;
  w.begin_object().key("pools").begin_array();
  for (const PoolInfo& p : manager->pools()) write_pool(w, p);
  w.end_array().end_object();
  replies_.send_json(ctx, 200, w.take());
}

}  // namespace pvs::service
