// The cluster mode of the Stack (stack_fixture.h, "Cluster"): N node namespaces, each with its
// bridge, ruleset and agent, linked to the controller's namespace this thread lives in, and
// one pvesim with every node behind its endpoint.
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>

#include "sim.h"
#include "support/sshd_fixture.h"
#include "support/stack_detail.h"
#include "support/stack_fixture.h"

namespace pvs::test {

using stack_detail::must;
using stack_detail::run;

void Stack::setup_cluster() {
  node_agents_.assign(static_cast<std::size_t>(options_.nodes), -1);
  for (int i = 1; i <= options_.nodes; ++i) setup_cluster_node(i);
  pvesim::Options so;
  so.tokens[kTokenId] = kTokenSecret;
  so.auth_delay_ms = 0;
  so.default_task_ms = options_.default_task_ms;
  so.task_ms = options_.task_ms;
  so.pools = {"pve-sandbox"};
  so.backend = options_.backend;
  for (int vmid : options_.shared_templates) so.shared_templates.push_back({vmid, node_name(1)});
  for (int i = 1; i <= options_.nodes; ++i) {
    pvesim::NodeOptions n;
    n.name = node_name(i);
    n.templates = {8999 + i};
    n.netns.bridge = "vmbr1";
    n.netns.bridge_cidr = "10." + std::to_string(90 + i) + ".0.1/16";
    n.netns.create_bridge = false;
    n.netns.node_netns = id_ + "-" + n.name;
    n.netns.ns_prefix = id_ + "-";  // VMIDs are unique in the cluster
    n.netns.authorized_keys = dir_ + "/authorized_keys";
    n.netns.user = user_;
    n.netns.private_tmp = true;
    so.nodes.push_back(std::move(n));
  }
  auto sim = pvesim::Simulator::start(so);
  must(sim.has_value(), "pvesim: " + (sim ? std::string() : sim.error().message));
  sim_ = std::move(*sim);
}

// Node i: its namespace, the link to the controller (the controller routes the node's sandbox
// network through it), its bridge, its ruleset (SSH allowed from the controller's address) and
// its agent.
void Stack::setup_cluster_node(int i) {
  std::string ns = id_ + "-" + node_name(i);
  std::string octet = std::to_string(90 + i);
  std::string link = "172.31." + std::to_string(i);
  run({"ip", "netns", "add", ns});
  run({"ip", "-n", ns, "link", "set", "lo", "up"});
  run({"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"});
  std::string veth = "to" + node_name(i);
  run({"ip", "link", "add", veth, "type", "veth", "peer", "name", "uplink", "netns", ns});
  run({"ip", "addr", "add", link + ".1/24", "dev", veth});
  run({"ip", "link", "set", veth, "up"});
  run({"ip", "-n", ns, "addr", "add", link + ".2/24", "dev", "uplink"});
  run({"ip", "-n", ns, "link", "set", "uplink", "up"});
  run({"ip", "route", "add", "10." + octet + ".0.0/16", "via", link + ".2"});
  run({"ip", "-n", ns, "link", "add", "vmbr1", "address", "02:00:0a:" + octet + ":00:01", "type",
       "bridge", "stp_state", "0", "forward_delay", "0"});
  run({"ip", "-n", ns, "addr", "add", "10." + octet + ".0.1/16", "dev", "vmbr1"});
  run({"ip", "-n", ns, "link", "set", "vmbr1", "up"});
  std::string ruleset = dir_ + "/sandbox-" + node_name(i) + ".nft";
  run({"ip", "netns", "exec", ns, "bash", "-c",
       "set -euo pipefail; source \"$1\"; if pvs_kernel_has_ibrname; then s=bridge; "
       "else s=ports; fi; pvs_render_ruleset \"$2\" vmbr1 \"$3\" \"$4\" \"$s\" "
       "'{ \"veth*\", \"fwpr*\" }' \"$5\" > \"$6\"",
       "render", PVS_STACK_RULESET_LIB, PVS_STACK_RULESET, "10." + octet + ".0.0/16",
       "10." + octet + ".0.1", link + ".1", ruleset});
  run({"ip", "netns", "exec", ns, "nft", "-f", ruleset});
  if (options_.agent) {
    std::ofstream(dir_ + "/agent-" + node_name(i) + ".yaml") << agent_config(i);
    start_agent(i);
  }
}

}  // namespace pvs::test
