// The cluster's nodes (admin): health, capacity, sandboxes and pools per node; drain/undrain.
#include "api/fleet/fleet_routes.h"
#include "http/api_error.h"
#include "http/json.h"
#include "http/requests.h"

namespace pvs::service {
namespace {

void write_node(JsonWriter& w, const NodeInfo& n, const std::vector<PoolInfo>& pools) {
  w.begin_object();
  w.key("name").value(n.name).key("online").value(n.online).key("agent_ok").value(n.agent_ok);
  w.key("drained").value(n.drained).key("recovered").value(n.recovered);
  w.key("error");
  if (n.error.empty()) {
    w.null();
  } else {
    w.value(n.error);
  }
  w.key("labels").value(n.labels);
  w.key("bridge").value(n.bridge).key("sandbox_cidr").value(n.sandbox_cidr.to_string());
  w.key("template_vmid").value(n.template_vmid);
  w.key("sandboxes").value(n.sandboxes).key("creating").value(n.creating);
  w.key("max_sandboxes").value(n.max_sandboxes);
  w.key("memory_total_bytes").value(n.mem_total).key("memory_used_bytes").value(n.mem_used);
  w.key("free_addresses").value(n.free_addresses);
  w.key("pools").begin_array();
  for (const PoolInfo& p : pools) {
    if (p.node == n.name) write_pool(w, p);
  }
  w.end_array();
  w.end_object();
}

}  // namespace

void FleetRoutes::nodes(RequestContext& ctx) {
  auto manager = manager_();
  auto pools = manager->pools();
  JsonWriter w;
  w.begin_object().key("nodes").begin_array();
  for (const NodeInfo& n : manager->nodes()) write_node(w, n, pools);
  w.end_array().end_object();
  replies_.send_json(ctx, 200, w.take());
}

void FleetRoutes::set_drain(RequestContext& ctx, bool drained) {
  const std::string& name = ctx.params.at("name");
  if (!is_node_name(name)) throw bad_request("name: not a node name");
  JsonWriter p;
  p.begin_object().key("node").value(name).end_object();
  ctx.params_json = p.take();
  auto manager = manager_();
  if (auto st = manager->drain(name, drained); !st) throw from_error(st.error());
  for (const NodeInfo& n : manager->nodes()) {
    if (n.name != name) continue;
    JsonWriter w;
    write_node(w, n, manager->pools());
    return replies_.send_json(ctx, 200, w.take());
  }
  throw not_found("node " + name + " is not configured");
}

}  // namespace pvs::service
