// controller.yaml's cluster part: the `nodes:` list, and the two pieces a node shares with the
// single-node sections (its sandbox network, how to reach its agent).
#include <set>

#include "core/config/config_parts.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/sandbox_metadata.h"

namespace pvs::service {

void parse_sandbox_network(yaml::Map& s, SandboxNetwork net) {
  std::string cidr = net.cidr->to_string(), gateway = net.gateway->to_string();
  s.string("cidr", &cidr);
  auto parsed = Cidr::parse(cidr);
  if (!parsed) return s.fail("cidr", parsed.error().message);
  *net.cidr = *parsed;
  s.string("gateway", &gateway);
  auto gw = Ipv4Address::parse(gateway);
  if (!gw) return s.fail("gateway", gw.error().message);
  *net.gateway = *gw;
  if (!net.cidr->contains(*net.gateway))
    s.fail("gateway", "must lie inside " + s.key("cidr") + " " + cidr);
  s.string("bridge", net.bridge);
  if (s.ok() && (net.bridge->empty() || net.bridge->size() > 15))
    s.fail("bridge", "must be an interface name of 1-15 characters");
  std::vector<std::string> reserved;
  s.string_list("reserved", &reserved);
  for (const auto& r : reserved) {
    auto rc = Cidr::parse(r);
    if (!rc) return s.fail("reserved", yaml::quoted_value(r) + ": " + rc.error().message);
    net.reserved->push_back(*rc);
  }
}

void parse_agent_options(yaml::Map& s, ManagerAgentOptions* agent) {
  bool has_socket = s.has("socket");
  s.string("socket", &agent->socket_path);
  if (s.ok() && agent->socket_path.empty()) s.fail("socket", "must not be empty");
  s.string_list("command", &agent->command);
  if (s.ok() && has_socket && !agent->command.empty())
    s.fail("command", "set either socket (an agent on this host) or command (a relay), not both");
  if (s.ok() && s.has("command") && agent->command.empty())
    s.fail("command", "must name a program, e.g. [ssh, -T, pve-sandbox-relay@pve2]");
  seconds(s, "timeout_seconds", &agent->timeout, 1, 600);
}

namespace {

NodeConfig parse_node(yaml::Map& n, const ManagerConfig& m) {
  NodeConfig node;
  n.string("name", &node.name, yaml::Need::kRequired);
  yaml::Map agent = n.map("agent");
  parse_agent_options(agent, &node.agent);
  (void)agent.finish();
  yaml::Map net = n.map("network");
  if (n.ok() && !(net.has("cidr") && net.has("gateway")))
    n.fail("network", "each node needs its own network.cidr and network.gateway");
  parse_sandbox_network(net, {&node.sandbox_cidr, &node.gateway, &node.bridge, &node.reserved});
  (void)net.finish();
  n.integer("template_vmid", &node.template_vmid, 0, 999999999);
  if (n.ok() && node.template_vmid > 0 && node.template_vmid < 100)
    n.fail("template_vmid", "must be a VMID (100 or more), or 0 for proxmox.template_vmid");
  if (n.ok() && node.template_vmid == 0 && m.template_vmid == 0)
    n.fail("template_vmid",
           "is required here, or proxmox.template_vmid (a template on shared storage)");
  auto vmid = static_cast<std::uint32_t>(node.template_vmid);
  if (n.ok() && node.template_vmid != 0 && vmid >= m.vmid_min && vmid <= m.vmid_max)
    n.fail("template_vmid", "must lie outside [vmid_min, vmid_max]");
  n.integer("template_replicas", &node.template_replicas, 0, 16);
  n.integer("max_sandboxes", &node.max_sandboxes, 0, 100000);
  n.integer("min_free_memory_mb", &node.min_free_memory_mb, 0, 1ll << 30);
  n.string_map("labels", &node.labels);
  if (auto v = validate_labels(node.labels); n.ok() && !v) n.fail("labels", v.error().message);
  n.boolean("drained", &node.drained);
  return node;
}

}  // namespace

void parse_nodes(yaml::Map& top, ServiceConfig& c) {
  std::set<std::string> sockets;
  for (yaml::Map n : top.maps("nodes")) {
    NodeConfig node = parse_node(n, c.manager);
    if (n.ok() && node.agent.command.empty() && !sockets.insert(node.agent.socket_path).second)
      n.fail("agent", "another node uses the agent socket " + node.agent.socket_path +
                          ": each node has its own agent (a relay command for remote nodes)");
    (void)n.finish();
    c.manager.nodes.push_back(std::move(node));
  }
  if (!top.ok() || c.manager.nodes.empty()) return;
  if (auto nodes = cluster_nodes(c.manager); !nodes) top.fail("nodes", nodes.error().message);
}

}  // namespace pvs::service
