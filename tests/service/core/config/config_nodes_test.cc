// controller.yaml's `nodes:` list (a cluster): what parses, and the errors an operator sees.
#include <gtest/gtest.h>

#include <regex>

#include "core/config/config.h"
#include "service/core/config/config_test_util.h"

namespace pvs::service {
namespace {

using testing::error_of;
using testing::kEnv;
using testing::kHash;

// A cluster config; `proxmox_extra` goes under proxmox:, `nodes` is the list's text.
std::string cluster(const std::string& nodes, const std::string& proxmox_extra = "",
                    const std::string& extra = "") {
  return std::string("auth:\n  tokens:\n    - name: ci\n      sha256: ") + kHash +
         "\nproxmox:\n  url: https://127.0.0.1:8006\n"
         "  token_id: sandbox@pve!controller\n  token_secret_env: PVS_TEST_SECRET\n" +
         proxmox_extra + "ssh:\n  host_key_policy: insecure\n" + extra + "nodes:\n" + nodes;
}

const char* kTwoNodes =
    "  - name: pve1\n"
    "    agent: {socket: /run/pve-sandbox-agent/agent.sock}\n"
    "    network: {cidr: 10.91.0.0/16, gateway: 10.91.0.1, bridge: vmbr1}\n"
    "    template_vmid: 9001\n"
    "    max_sandboxes: 40\n"
    "    labels: {zone: a, gpu: \"no\"}\n"
    "  - name: pve2\n"
    "    agent:\n"
    "      command: [ssh, -T, pve-sandbox-relay@pve2]\n"
    "      timeout_seconds: 5\n"
    "    network:\n"
    "      cidr: 10.92.0.0/16\n"
    "      gateway: 10.92.0.1\n"
    "      reserved: [10.92.0.0/24]\n"
    "    min_free_memory_mb: 2048\n"
    "    drained: true\n";

TEST(ConfigNodes, TwoNodesParseWithTheirOwnAgentsNetworksAndTemplates) {
  auto c = parse_config(cluster(kTwoNodes, "  template_vmid: 9000\n"), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  const auto& nodes = c->manager.nodes;
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "pve1");
  EXPECT_EQ(nodes[0].agent.socket_path, "/run/pve-sandbox-agent/agent.sock");
  EXPECT_TRUE(nodes[0].agent.command.empty());
  EXPECT_EQ(nodes[0].sandbox_cidr.to_string(), "10.91.0.0/16");
  EXPECT_EQ(nodes[0].template_vmid, 9001);
  EXPECT_EQ(nodes[0].max_sandboxes, 40);
  EXPECT_EQ(nodes[0].labels, (Labels{{"gpu", "no"}, {"zone", "a"}}));
  EXPECT_EQ(nodes[1].agent.command,
            (std::vector<std::string>{"ssh", "-T", "pve-sandbox-relay@pve2"}));
  EXPECT_EQ(nodes[1].agent.timeout, std::chrono::seconds(5));
  EXPECT_EQ(nodes[1].bridge, "vmbr1");
  ASSERT_EQ(nodes[1].reserved.size(), 1u);
  EXPECT_EQ(nodes[1].template_vmid, 0);  // the shared proxmox.template_vmid, cloned with target
  EXPECT_EQ(nodes[1].min_free_memory_mb, 2048);
  EXPECT_TRUE(nodes[1].drained);
  EXPECT_TRUE(c->manager.node.empty());
  std::string text = describe(*c);
  EXPECT_NE(text.find("node pve1 network 10.91.0.0/16"), std::string::npos) << text;
  EXPECT_NE(text.find("template=9000 (shared, target)"), std::string::npos) << text;
  EXPECT_NE(text.find("relay: ssh -T pve-sandbox-relay@pve2"), std::string::npos) << text;
  EXPECT_NE(text.find("drained"), std::string::npos) << text;
}

TEST(ConfigNodes, ErrorsNameTheNodeKeyAndReason) {
  // The networks of two nodes overlap (each node routes its own).
  std::string overlap = kTwoNodes;
  overlap.replace(overlap.find("10.92.0.0/16"), 12, "10.91.128.0/17");
  overlap.replace(overlap.find("10.92.0.1"), 9, "10.91.128.1");
  overlap.replace(overlap.find("10.92.0.0/24"), 12, "10.91.128.0/24");
  EXPECT_EQ(error_of(cluster(overlap, "  template_vmid: 9000\n")),
            "controller.yaml: nodes: nodes: the sandbox networks of pve1 (10.91.0.0/16) and pve2 "
            "(10.91.128.0/17) overlap: each node routes its own");
  // A node without a template while there is no shared one.
  EXPECT_EQ(error_of(cluster(kTwoNodes)),
            "controller.yaml: nodes[1].template_vmid: is required here, or "
            "proxmox.template_vmid (a template on shared storage)");
  // Single-node keys beside nodes:.
  EXPECT_EQ(error_of(cluster(kTwoNodes, "  template_vmid: 9000\n  node: pve1\n")),
            "controller.yaml: proxmox.node: with nodes: every node is named there (nodes[].name), "
            "not here");
  EXPECT_EQ(
      error_of(cluster(kTwoNodes, "  template_vmid: 9000\n", "network:\n  cidr: 10.99.0.0/16\n")),
      "controller.yaml: network.cidr: with nodes: every node has its own "
      "(nodes[].network.cidr)");
  EXPECT_EQ(
      error_of(cluster(kTwoNodes, "  template_vmid: 9000\n", "agent:\n  socket: /run/x.sock\n")),
      "controller.yaml: agent.socket: with nodes: every node names its own agent "
      "(nodes[].agent.socket)");
  // A node without its network; socket and command together; one socket for two nodes.
  EXPECT_EQ(error_of(cluster("  - name: pve1\n    template_vmid: 9001\n")),
            "controller.yaml: nodes[0].network: each node needs its own network.cidr and "
            "network.gateway");
  EXPECT_EQ(error_of(cluster("  - name: pve1\n    template_vmid: 9001\n"
                             "    agent: {socket: /a.sock, command: [ssh]}\n"
                             "    network: {cidr: 10.91.0.0/16, gateway: 10.91.0.1}\n")),
            "controller.yaml: nodes[0].agent.command: set either socket (an agent on this host) "
            "or command (a relay), not both");
  std::string shared = std::string(kTwoNodes);
  shared.replace(shared.find("command: [ssh, -T, pve-sandbox-relay@pve2]"), 42,
                 "socket: /run/pve-sandbox-agent/agent.sock");
  EXPECT_EQ(error_of(cluster(shared, "  template_vmid: 9000\n")),
            "controller.yaml: nodes[1].agent: another node uses the agent socket "
            "/run/pve-sandbox-agent/agent.sock: each node has its own agent (a relay command for "
            "remote nodes)");
  // Gateway outside the node's network; bad labels; unknown keys; a duplicate name.
  EXPECT_EQ(error_of(cluster("  - name: pve1\n    template_vmid: 9001\n"
                             "    network: {cidr: 10.91.0.0/16, gateway: 10.92.0.1}\n")),
            "controller.yaml: nodes[0].network.gateway: must lie inside nodes[0].network.cidr "
            "10.91.0.0/16");
  EXPECT_NE(error_of(cluster("  - name: pve1\n    template_vmid: 9001\n"
                             "    network: {cidr: 10.91.0.0/16, gateway: 10.91.0.1}\n"
                             "    labels: [a, b]\n"))
                .find("nodes[0].labels: must be a mapping of names to strings"),
            std::string::npos);
  EXPECT_NE(error_of(cluster("  - name: pve1\n    template_vmid: 9001\n"
                             "    network: {cidr: 10.91.0.0/16, gateway: 10.91.0.1}\n"
                             "    capacity: 3\n"))
                .find("nodes[0].capacity"),
            std::string::npos);
  std::string twice = kTwoNodes;
  twice.replace(twice.find("name: pve2"), 10, "name: pve1");
  EXPECT_EQ(error_of(cluster(twice, "  template_vmid: 9000\n")),
            "controller.yaml: nodes: nodes: node pve1 appears twice");
}

TEST(ConfigNodes, TemplateReplicasPerNode) {
  std::string nodes =
      "  - name: pve1\n"
      "    network: {cidr: 10.91.0.0/16, gateway: 10.91.0.1}\n"
      "    template_vmid: 9001\n"
      "    template_replicas: 8\n";
  auto c = parse_config(cluster(nodes), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.nodes[0].template_replicas, 8);
  EXPECT_EQ(error_of(cluster(nodes + "  - name: pve2\n"
                                     "    network: {cidr: 10.92.0.0/16, gateway: 10.92.0.1}\n"
                                     "    template_vmid: 9002\n"
                                     "    template_replicas: 99\n")),
            "controller.yaml: nodes[1].template_replicas: must be an integer in [0, 16], not "
            "\"99\"");
}

}  // namespace
}  // namespace pvs::service
